/**
 * A whole machine: single-ID HTTP (Leaf's routes) with IDMINT_PROCESSES=1 and =2 on Postgres,
 * in alternating rounds; tail latency and event-loop delay per round; idle memory of the
 * embedded server and of the api role on Postgres; restart to first ID.
 * Reproduce: `npm run infra:up && npm run bench -- processes` (wrk if installed, else autocannon).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnServer, type SpawnedServer } from '../test/support/spawn.js';
import { median, table, type Section } from './lib.js';
import { loadGenerator, loadRound, summary, SUMMARY_HEADERS, type Round } from './peers.js';

const ROUNDS = 4;
const SECONDS = 8;
const CONNECTIONS = 32;
/** Requests per write in the pipelined rounds, which judge how far a second process scales. */
const PIPELINE = 8;
const root = new URL('..', import.meta.url).pathname;

function infraDatabase(): string {
  if (process.env.DATABASE_URL) return process.env.DATABASE_URL;
  const env = join(root, '.infra/env');
  const url = existsSync(env) ? /DATABASE_URL=(\S+)/.exec(readFileSync(env, 'utf8'))?.[1] : undefined;
  if (!url) throw new Error('needs Postgres: run `npm run infra:up` first (or set DATABASE_URL)');
  return url;
}

/** Resident memory of a process and its children, MB. */
function rssMb(pid: number): number {
  const pids = [
    pid,
    ...execFileSync('bash', ['-c', `pgrep -P ${pid} || true`], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number),
  ];
  const kb = pids.map((p) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0)).reduce((a, b) => a + b, 0);
  return Math.round(kb / 1024);
}

/** prom-client samples the loop every 10 ms and its histogram holds whole intervals: a loop that never stalls reads 10 ms. */
const SAMPLING_MS = 10;

/** The event loop's p99 delay beyond the sampling interval (0 = never late), ms. */
async function eventLoopP99Ms(server: SpawnedServer): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const p99 = Number(/^idmint_nodejs_eventloop_lag_p99_seconds (\S+)$/m.exec(text)?.[1] ?? Number.NaN) * 1000;
  return Math.max(0, p99 - SAMPLING_MS);
}

async function firstId(url: string): Promise<void> {
  for (;;) {
    const response = await fetch(`${url}/api/segment/get/bench`).catch(() => undefined);
    if (response?.ok) return;
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The control: bench/bare-http.mjs with `workers` cluster workers, answering once listening. */
async function startBare(workers: number, port: number): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [join(root, 'bench/bare-http.mjs')], {
    env: { ...process.env, WORKERS: String(workers), PORT: String(port) },
    stdio: 'ignore',
  });
  const url = `http://127.0.0.1:${port}/`;
  for (let i = 0; i < 500; i++) {
    if ((await fetch(url).catch(() => undefined))?.ok) return { url, child };
    await new Promise((r) => setTimeout(r, 10));
  }
  child.kill('SIGKILL');
  throw new Error(`the bare node:http control did not answer on ${url}`);
}

interface Rounds {
  one: Round[];
  two: Round[];
  onePiped: Round[];
  twoPiped: Round[];
}

/** The summary rows of both configurations, unpipelined then pipelined. */
function summaries(one: string, two: string, r: Rounds): Array<Array<string | number>> {
  return [
    summary(one, r.one),
    summary(two, r.two),
    summary(`${one}, pipelined ×${PIPELINE}`, r.onePiped),
    summary(`${two}, pipelined ×${PIPELINE}`, r.twoPiped),
  ];
}

async function start(env: Record<string, string>): Promise<{ server: SpawnedServer; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-bench-procs-'));
  const server = await spawnServer({ IDMINT_DATA_DIR: dir, LOG_LEVEL: 'warn', ...env });
  return { server, dir };
}

export async function run(): Promise<Section> {
  execFileSync(process.execPath, ['scripts/build.mjs', '--if-stale'], { cwd: root, stdio: 'ignore' });
  const pg = { DATABASE_URL: infraDatabase(), IDMINT_PG_SCHEMA: 'bench_processes', IDMINT_ROLES: 'api' };
  const dirs = [mkdtempSync(join(tmpdir(), 'idmint-bench-procs-')), mkdtempSync(join(tmpdir(), 'idmint-bench-procs-'))] as const;
  const rows: Array<Array<string | number>> = [];
  const perRound: Array<Array<string | number>> = [];
  const results: Record<string, Rounds> = {};
  try {
    const first = await spawnServer({ IDMINT_DATA_DIR: dirs[0], LOG_LEVEL: 'warn', ...pg, IDMINT_PROCESSES: '1' });
    await fetch(`${first.url}/v1/biz`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ bizTag: 'bench', step: 10000 }),
    });
    await first.stop();
    for (const route of ['/api/segment/get/bench', '/api/snowflake/get/bench']) {
      const res: Rounds = { one: [], two: [], onePiped: [], twoPiped: [] };
      for (let i = 0; i < ROUNDS; i++) {
        for (const [name, processes, dir, list, piped] of [
          ['1 process', '1', dirs[0], res.one, res.onePiped],
          ['2 processes', '2', dirs[1], res.two, res.twoPiped],
        ] as const) {
          // Each configuration runs alone, started fresh for its round: an idle server group beside
          // the one under load took up to a third off its requests/s on this machine.
          const s = await spawnServer({ IDMINT_DATA_DIR: dir, LOG_LEVEL: 'warn', ...pg, IDMINT_PROCESSES: processes });
          try {
            await loadRound(`${s.url}${route}`, 2, CONNECTIONS); // warm-up
            await eventLoopP99Ms(s); // resets the delay histogram
            const round = await loadRound(`${s.url}${route}`, SECONDS, CONNECTIONS);
            const loopP99 = await eventLoopP99Ms(s);
            list.push(round);
            const pipedRound = await loadRound(`${s.url}${route}`, SECONDS, CONNECTIONS, PIPELINE);
            piped.push(pipedRound);
            perRound.push([
              route,
              name,
              i + 1,
              Math.round(round.requestsPerSecond),
              round.p50Ms.toFixed(2),
              round.p99Ms.toFixed(2),
              (round.p99Ms / round.p50Ms).toFixed(1),
              loopP99.toFixed(1),
              Math.round(pipedRound.requestsPerSecond),
            ]);
          } finally {
            await s.stop();
          }
        }
      }
      results[route] = res;
      rows.push(...summaries(`${route}, IDMINT_PROCESSES=1`, `${route}, IDMINT_PROCESSES=2`, res));
    }
  } finally {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }

  // The control, same loads: how far a bare node:http server scales from 1 to 2 workers on this machine.
  const bareOne = await startBare(1, 18_991);
  const bareTwo = await startBare(2, 18_992);
  const bare: Rounds = { one: [], two: [], onePiped: [], twoPiped: [] };
  try {
    for (const b of [bareOne, bareTwo]) await loadRound(b.url, 2, CONNECTIONS);
    for (let i = 0; i < ROUNDS; i++) {
      bare.one.push(await loadRound(bareOne.url, SECONDS, CONNECTIONS));
      bare.two.push(await loadRound(bareTwo.url, SECONDS, CONNECTIONS));
      bare.onePiped.push(await loadRound(bareOne.url, SECONDS, CONNECTIONS, PIPELINE));
      bare.twoPiped.push(await loadRound(bareTwo.url, SECONDS, CONNECTIONS, PIPELINE));
    }
  } finally {
    for (const b of [bareOne, bareTwo]) b.child.kill('SIGTERM');
  }
  rows.push(...summaries('control: bare node:http counter, 1 worker', 'control: bare node:http counter, 2 workers', bare));

  // Idle memory, and restart to first ID on Postgres (compiled start).
  // The embedded server twice: its first start (which creates the PGlite database) and a restart.
  const embedded = await start({});
  await fetch(`${embedded.server.url}/v1/ids/demo`);
  await new Promise((r) => setTimeout(r, 3000));
  const embeddedFirstRss = rssMb(embedded.server.child.pid!);
  await embedded.server.stop();
  const embeddedAgain = await spawnServer({ IDMINT_DATA_DIR: embedded.dir, LOG_LEVEL: 'warn' });
  await fetch(`${embeddedAgain.url}/v1/ids/demo`);
  await new Promise((r) => setTimeout(r, 3000));
  const embeddedRss = rssMb(embeddedAgain.child.pid!);
  await embeddedAgain.stop();
  rmSync(embedded.dir, { recursive: true, force: true });

  const api = await start(pg);
  await firstId(api.server.url);
  await new Promise((r) => setTimeout(r, 3000));
  const apiRss = rssMb(api.server.child.pid!);
  await api.server.stop();
  const restarts: number[] = [];
  for (let i = 0; i < 3; i++) {
    const t0 = performance.now();
    const again = await spawnServer({ IDMINT_DATA_DIR: api.dir, LOG_LEVEL: 'warn', ...pg });
    await firstId(again.url);
    restarts.push(performance.now() - t0);
    await again.stop();
  }
  rmSync(api.dir, { recursive: true, force: true });

  // Each 2-process round beside the 1-process round just before it, the median of those pairs:
  // this machine's rounds drift by half within minutes, and a pair shares its minute.
  const ratio = (r: Rounds, piped: boolean): number => {
    const [one, two] = piped ? [r.onePiped, r.twoPiped] : [r.one, r.two];
    return median(two.map((x, i) => x.requestsPerSecond / one[i]!.requestsPerSecond));
  };
  const seg = results['/api/segment/get/bench']!;
  const sf = results['/api/snowflake/get/bench']!;
  const [segPiped, sfPiped, barePiped] = [ratio(seg, true), ratio(sf, true), ratio(bare, true)];
  const tailOk = perRound.every((r) => Number(r[6]) <= 10);
  const restart = median(restarts);
  return {
    title: 'A whole machine: processes, tails, memory, restart',
    body: [
      `Postgres (api role, in-memory double buffers), ${ROUNDS} alternating rounds of ${SECONDS} s per route and load (unpipelined, then pipelined ×${PIPELINE}) (each configuration alone, started fresh and warmed for 2 s), ${CONNECTIONS} connections, ${await loadGenerator()} on the same 2 cores.`,
      '',
      table(SUMMARY_HEADERS, rows),
      '',
      `IDMINT_PROCESSES=2 / 1 (req/s, median of the ${ROUNDS} round pairs), pipelined rounds: segment ${segPiped.toFixed(2)} ×, Snowflake ${sfPiped.toFixed(2)} × — target ≥ 1.5 ×: **${segPiped >= 1.5 && sfPiped >= 1.5 ? 'met' : 'not met'}**. ` +
        `Unpipelined rounds: segment ${ratio(seg, false).toFixed(2)} ×, Snowflake ${ratio(sf, false).toFixed(2)} ×.`,
      '',
      `Why the target is judged on pipelined rounds: the load generator runs on the same 2 cores, and unpipelined it spends about as much CPU per request as the server, so it takes the core a second process would use. ` +
        `The control shows it: a bare \`node:http\` server answering a counter (bench/bare-http.mjs) goes from 1 to 2 cluster workers by ${ratio(bare, false).toFixed(2)} × unpipelined and ${barePiped.toFixed(2)} × pipelined ×${PIPELINE} (wrk writes ${PIPELINE} requests at a time; the server still answers each request with its own response). ` +
        (barePiped < 1.5
          ? 'In this run even the bare server could not show 1.5 ×: the machine had no room for it.'
          : 'The machine had room for 1.5 × in this run: where idmint falls short, the shortfall is its own.'),
      '',
      'Every round (p99/p50 target ≤ 10 on a loaded machine; event-loop delay p99 from `idmint_nodejs_eventloop_lag_p99_seconds`, read after the round, minus its 10 ms sampling interval, which the histogram includes):',
      '',
      table(['route', 'processes', 'round', 'req/s', 'p50 ms', 'p99 ms', 'p99/p50', 'event-loop delay p99 ms', `req/s pipelined ×${PIPELINE}`], perRound),
      '',
      `p99 ≤ 10 × p50 in every round: **${tailOk ? 'met' : 'not met'}**.`,
      '',
      "Where the segment route's pipelined tail went (found 2026-11-24 with timers around the dispenser's tag lookup and take, on one api process on Postgres, wrk ×8 pipelined, 32 connections): " +
        "the takes were never slow; requests waited on the once-a-second reload of the tag's token hashes — every request arriving while they were expired ran its own Postgres query, hundreds at once through a pool of 10 connections — " +
        'and on the tag-settings reload, which all requests awaited. Both caches now refresh ahead: an expired entry answers at once while one reload runs behind it. ' +
        'Same harness, alternating 6 s rounds: segment p99 16–40 ms before, 5.0–6.5 ms after, Snowflake 4.4–4.9 ms; p50 2.3 ms for both throughout.',
      '',
      table(
        ['measure', 'value', 'target', 'met'],
        [
          ['embedded server idle RSS, first start (creates the database)', `${embeddedFirstRss} MB`, '—', '—'],
          ['embedded server idle RSS, restarted', `${embeddedRss} MB`, '≤ 250 MB', embeddedRss <= 250 ? 'yes' : 'no'],
          ['api role on Postgres idle RSS', `${apiRss} MB`, '≤ 150 MB', apiRss <= 150 ? 'yes' : 'no'],
          ['restart to first ID, api role on Postgres (median of 3, compiled)', `${Math.round(restart)} ms`, '≤ 1000 ms', restart <= 1000 ? 'yes' : 'no'],
        ],
      ),
    ].join('\n'),
  };
}
