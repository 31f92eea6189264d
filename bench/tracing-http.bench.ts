/**
 * What tracing costs on the hottest path, HTTP `GET /v1/ids/demo?count=1` on the embedded server:
 * today's code before tracing existed (a worktree of the commit before src/tracing, or
 * IDMINT_BENCH_BASELINE=<ref>), this code with tracing off (no SDK registered), and this code
 * with tracing on (an SDK with a batch processor and an in-memory exporter, preloaded as an
 * application would). Three servers up at once, loaded in turns round after round, so drift on a
 * shared machine hits all alike. Reproduce: `npm run bench -- tracing-http`. Over sockets, on a busy
 * machine its rounds swing widely; bench/tracing.bench.ts measures the same comparison in one process.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../test/support/spawn.js';
import { median, perSecond, table, type Section } from './lib.js';
import { loadGenerator, loadRound, type Round } from './peers.js';

const ROUNDS = 5;
const SECONDS = 5;
const CONNECTIONS = 32;
const here = fileURLToPath(new URL('..', import.meta.url));

function git(args: string[], cwd = here): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8' }).trim();
}

/** The commit before tracing was added (what "today" meant before it), unless IDMINT_BENCH_BASELINE names one. */
function baselineRef(): string {
  if (process.env.IDMINT_BENCH_BASELINE) return process.env.IDMINT_BENCH_BASELINE;
  const added = git(['log', '--diff-filter=A', '--format=%H', '--', 'src/tracing/tracer.ts']).split('\n').pop();
  if (!added) throw new Error('no commit adds src/tracing/tracer.ts: set IDMINT_BENCH_BASELINE to the ref to compare with');
  return `${added}^`;
}

interface Server {
  url: string;
  child: ChildProcess;
  dataDir: string;
}

async function start(cwd: string, nodeArgs: string[] = []): Promise<Server> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'idmint-bench-trace-'));
  const env = {
    ...process.env,
    DATABASE_URL: '',
    REDIS_URL: '',
    KAFKA_BROKERS: '',
    ZK_CONNECT: '',
    IDMINT_OTEL: '0',
    IDMINT_DATA_DIR: dataDir,
    IDMINT_PORT: String(port),
    LOG_LEVEL: 'warn',
  };
  // The same entry (sources through tsx) for all three: only the code under test differs.
  const child = spawn(process.execPath, ['--import', 'tsx', ...nodeArgs, 'workers/all.ts'], { cwd, env, stdio: 'ignore' });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 1200; i++) {
    if (
      await fetch(`${url}/v1/ids/demo?count=1`).then(
        (r) => r.ok,
        () => false,
      )
    )
      return { url, child, dataDir };
    if (child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`the server in ${cwd} did not serve /v1/ids/demo`);
}

export async function run(): Promise<Section> {
  const ref = baselineRef();
  const commit = git(['rev-parse', '--short', ref]);
  const baseDir = mkdtempSync(join(tmpdir(), 'idmint-bench-baseline-'));
  git(['worktree', 'add', '--detach', baseDir, ref]);
  // The baseline's dependencies are this checkout's (it imports none of the new ones).
  if (!existsSync(join(baseDir, 'node_modules'))) symlinkSync(join(here, 'node_modules'), join(baseDir, 'node_modules'));
  const servers: Server[] = [];
  try {
    const targets = [
      { name: `before tracing (${commit})`, server: await start(baseDir) },
      { name: 'tracing off (no SDK registered)', server: await start(here) },
      { name: 'tracing on (SDK, batch processor, in-memory exporter)', server: await start(here, ['--import', './bench/tracing-memory-sdk.mjs']) },
    ];
    servers.push(...targets.map((t) => t.server));
    const rounds = new Map<string, Round[]>(targets.map((t) => [t.name, []]));
    for (const t of targets) await loadRound(`${t.server.url}/v1/ids/demo?count=1`, 2, 8);
    for (let i = 0; i < ROUNDS; i++) {
      // A different order each round: no target always runs right after another.
      const order = targets.map((_, k) => targets[(k + i) % targets.length]!);
      for (const t of order) rounds.get(t.name)!.push(await loadRound(`${t.server.url}/v1/ids/demo?count=1`, SECONDS, CONNECTIONS));
    }
    const base = median(rounds.get(targets[0]!.name)!.map((r) => r.requestsPerSecond));
    const rows = targets.map((t) => {
      const rs = rounds.get(t.name)!;
      const rps = median(rs.map((r) => r.requestsPerSecond));
      return [
        t.name,
        perSecond(rps),
        `${((rps / base) * 100).toFixed(1)} %`,
        median(rs.map((r) => r.p50Ms)).toFixed(2),
        median(rs.map((r) => r.p99Ms)).toFixed(2),
        rs.map((r) => Math.round(r.requestsPerSecond)).join(' / '),
        rs.reduce((s, r) => s + r.errors, 0),
      ];
    });
    return {
      title: 'Tracing over sockets: HTTP `count=1` with tracing off and on, against the code before tracing',
      body: [
        `Embedded server (PGlite, in-memory buffers), \`GET /v1/ids/demo?count=1\`, ${CONNECTIONS} connections, ${ROUNDS} rounds of ${SECONDS} s per target in rotating order, load by ${await loadGenerator()}. Medians.`,
        '',
        table(['server', 'req/s', 'vs before', 'p50 ms', 'p99 ms', 'req/s per round', 'errors'], rows),
        '',
        'The target: tracing off ≥ 98 % of before (issue 45). Tracing on creates 3 spans per request (HTTP server, dispense, pool take).',
      ].join('\n'),
    };
  } finally {
    for (const s of servers) {
      s.child.kill('SIGTERM');
      rmSync(s.dataDir, { recursive: true, force: true });
    }
    git(['worktree', 'remove', '--force', baseDir]);
  }
}
