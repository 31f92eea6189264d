// The control for bench/processes.bench.ts: a bare node:http server answering a counter, with
// WORKERS cluster workers on PORT — the most any Node server can serve per process on this machine.
import cluster from 'node:cluster';
import http from 'node:http';

const workers = Number(process.env.WORKERS ?? 1);
if (cluster.isPrimary && workers > 1) {
  for (let i = 0; i < workers; i++) cluster.fork();
  process.on('SIGTERM', () => {
    for (const w of Object.values(cluster.workers ?? {})) w?.kill('SIGTERM');
    process.exit(0);
  });
} else {
  let n = 0;
  http
    .createServer((_req, res) => {
      const body = String(++n);
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': body.length });
      res.end(body);
    })
    .listen(Number(process.env.PORT), '127.0.0.1');
}
