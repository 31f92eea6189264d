/**
 * HTTP throughput and latency: the embedded server (PGlite + in-memory double buffers), the same
 * server with Redis list pools, and the standalone Snowflake server, each in its own process,
 * loaded by autocannon from this one. Reproduce: `npm run bench -- http`.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { freePort, spawnServer, type SpawnedServer } from '../test/support/spawn.js';
import { median, perSecond, table, type Section } from './lib.js';
import { loadGenerator, loadRound } from './peers.js';

const DURATION_S = 8;
const TARGET_ROUNDS = 5;
const CONNECTIONS = 32;

interface Load {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
}

async function load(url: string): Promise<Load> {
  const result = await autocannon({ url, connections: CONNECTIONS, duration: DURATION_S, pipelining: 1 });
  return {
    requestsPerSecond: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors,
    non2xx: result.non2xx,
  };
}

function infraRedis(): string | undefined {
  if (process.env.REDIS_URL) return process.env.REDIS_URL;
  const env = new URL('../.infra/env', import.meta.url);
  if (!existsSync(env)) return undefined;
  return /REDIS_URL=(\S+)/.exec(readFileSync(env, 'utf8'))?.[1];
}

async function withServer<T>(env: Record<string, string>, fn: (server: SpawnedServer) => Promise<T>): Promise<T> {
  const dataDir = mkdtempSync(join(tmpdir(), 'idmint-bench-'));
  const server = await spawnServer({ IDMINT_DATA_DIR: dataDir, LOG_LEVEL: 'warn', ...env });
  try {
    // Warm up: first segments, JIT.
    await autocannon({ url: `${server.url}/v1/ids/demo?count=1`, connections: 8, duration: 2 });
    return await fn(server);
  } finally {
    await server.stop('SIGTERM');
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function snowflakeServer<T>(fn: (url: string) => Promise<T>): Promise<T> {
  const dataDir = mkdtempSync(join(tmpdir(), 'idmint-bench-sf-'));
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'workers/snowflake.ts'], {
    cwd: new URL('..', import.meta.url).pathname,
    env: { ...process.env, IDMINT_DATA_DIR: dataDir, IDMINT_PORT: String(port), LOG_LEVEL: 'warn', ZK_CONNECT: '' },
    stdio: 'ignore',
  });
  const url = `http://127.0.0.1:${port}`;
  try {
    for (let i = 0; i < 300; i++) {
      if (
        await fetch(`${url}/healthz`).then(
          (r) => r.ok,
          () => false,
        )
      )
        break;
      await new Promise((r) => setTimeout(r, 100));
    }
    await autocannon({ url: `${url}/api/snowflake/get/x`, connections: 8, duration: 2 });
    return await fn(url);
  } finally {
    child.kill('SIGTERM');
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export async function run(): Promise<Section> {
  const rows: Array<Array<string | number>> = [];
  const add = (what: string, r: Load, idsPerRequest: number): Load => {
    rows.push([what, perSecond(r.requestsPerSecond), perSecond(r.requestsPerSecond * idsPerRequest), r.p50, r.p99, r.errors + r.non2xx]);
    return r;
  };
  let embeddedOne = 0;
  const redisTargets: string[] = [];

  await withServer({}, async (server) => {
    embeddedOne = add('embedded `GET /v1/ids/demo?count=1`', await load(`${server.url}/v1/ids/demo?count=1`), 1).requestsPerSecond;
    add('embedded `GET /v1/ids/demo?count=1000`', await load(`${server.url}/v1/ids/demo?count=1000`), 1000);
    add('embedded Leaf `GET /api/segment/get/demo`', await load(`${server.url}/api/segment/get/demo`), 1);
    add('embedded Leaf `GET /api/snowflake/get/demo`', await load(`${server.url}/api/snowflake/get/demo`), 1);
  });

  const redisUrl = infraRedis();
  if (redisUrl) {
    const redisEnv = (tag: string): Record<string, string> => ({
      REDIS_URL: redisUrl,
      IDMINT_POOL_KEY_PREFIX: `bench${process.pid}${tag}:`,
      IDMINT_REFILL_QUEUE: `bench-${process.pid}${tag}`,
      IDMINT_POOL_MIN_DEPTH: '200000',
    });
    // The default Redis pool of a segment tag: the counter pool, whose IDs leave Redis as ranges.
    let oneRound = 0;
    let thousand = 0;
    await withServer(redisEnv('c'), async (server) => {
      oneRound = add(
        'Redis counter pool `GET /v1/ids/demo?count=1` (a Redis round trip per request)',
        await load(`${server.url}/v1/ids/demo?count=1`),
        1,
      ).requestsPerSecond;
      thousand = add('Redis counter pool `GET /v1/ids/demo?count=1000`', await load(`${server.url}/v1/ids/demo?count=1000`), 1000).requestsPerSecond * 1000;
    });
    let buffered = 0;
    let bufferedThousand = 0;
    await withServer({ ...redisEnv('b'), IDMINT_LOCAL_BUFFER: '10000' }, async (server) => {
      buffered = add(
        'Redis counter pool `GET /v1/ids/demo?count=1`, `IDMINT_LOCAL_BUFFER=10000`',
        await load(`${server.url}/v1/ids/demo?count=1`),
        1,
      ).requestsPerSecond;
      bufferedThousand =
        add('Redis counter pool `GET /v1/ids/demo?count=1000`, `IDMINT_LOCAL_BUFFER=10000`', await load(`${server.url}/v1/ids/demo?count=1000`), 1000)
          .requestsPerSecond * 1000;
    });
    await withServer(redisEnv('l'), async (server) => {
      const created = await fetch(`${server.url}/v1/biz`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"bizTag":"list","pool":"redis-list"}',
      });
      if (created.status !== 201) throw new Error(`creating the list-pool tag: ${created.status} ${await created.text()}`);
      await autocannon({ url: `${server.url}/v1/ids/list?count=1000`, connections: 8, duration: 2 });
      add('Redis list pool `GET /v1/ids/list?count=1000` (strings in Redis)', await load(`${server.url}/v1/ids/list?count=1000`), 1000);
    });
    const within = (r: number): string => `${((r / embeddedOne) * 100).toFixed(0)} % of embedded`;
    // The targets, judged on alternating rounds against two long-running servers (each warmed
    // first): steady state, as a deployed server runs. Freshly started servers ran their first
    // seconds at 55–85 % of their steady rate on this machine, too unevenly to compare.
    const rounds = { embedded: [] as number[], buffered: [] as number[], bufferedThousand: [] as number[] };
    await withServer({}, async (embedded) => {
      await withServer({ ...redisEnv('t'), IDMINT_LOCAL_BUFFER: '10000' }, async (buffered) => {
        for (const server of [embedded, buffered]) await loadRound(`${server.url}/v1/ids/demo?count=1`, 5, CONNECTIONS);
        for (let i = 0; i < TARGET_ROUNDS; i++) {
          rounds.embedded.push((await loadRound(`${embedded.url}/v1/ids/demo?count=1`, DURATION_S, CONNECTIONS)).requestsPerSecond);
          rounds.buffered.push((await loadRound(`${buffered.url}/v1/ids/demo?count=1`, DURATION_S, CONNECTIONS)).requestsPerSecond);
        }
        for (let i = 0; i < TARGET_ROUNDS; i++) {
          rounds.bufferedThousand.push((await loadRound(`${buffered.url}/v1/ids/demo?count=1000`, DURATION_S, CONNECTIONS)).requestsPerSecond * 1000);
        }
      });
    });
    const [e1, b1, b1000] = [median(rounds.embedded), median(rounds.buffered), median(rounds.bufferedThousand)];
    // Each buffered round beside the embedded round just before it: drift on this shared machine
    // (its rounds moved by half within minutes) then hits both sides of a pair alike.
    const pairs = rounds.buffered.map((b, i) => b / rounds.embedded[i]!);
    const pairRatio = median(pairs);
    const generator = await loadGenerator();
    redisTargets.push(
      `Targets, ${TARGET_ROUNDS} alternating rounds against two long-running servers (warmed 5 s each), ${generator}, ${CONNECTIONS} connections, medians:`,
      '',
      table(
        ['what', 'median', 'rounds', 'target', 'met'],
        [
          ['embedded `count=1`', `${perSecond(e1)} req/s`, rounds.embedded.map((r) => perSecond(r)).join(', '), '', ''],
          [
            'Redis counter pool `count=1`, `IDMINT_LOCAL_BUFFER=10000`',
            `${perSecond(b1)} req/s (medians: ${((b1 / e1) * 100).toFixed(0)} % of embedded)`,
            rounds.buffered.map((r) => perSecond(r)).join(', '),
            '',
            '',
          ],
          [
            'the same, each round / the embedded round before it',
            `${(pairRatio * 100).toFixed(0)} % (median of ${pairs.length} pairs)`,
            pairs.map((r) => `${(r * 100).toFixed(0)} %`).join(', '),
            '≥ 90 % of embedded',
            pairRatio >= 0.9 ? 'yes' : 'no',
          ],
          [
            'Redis counter pool `count=1000`, `IDMINT_LOCAL_BUFFER=10000`',
            `${perSecond(b1000)} IDs/s`,
            rounds.bufferedThousand.map((r) => perSecond(r)).join(', '),
            '≥ 5 M IDs/s',
            b1000 >= 5e6 ? 'yes' : 'no',
          ],
        ],
      ),
      '',
      `In the table above (one autocannon run each, in this process): with the local buffer \`count=1\` ${within(buffered)}, \`count=1000\` ${perSecond(bufferedThousand)} IDs/s; without it ${within(oneRound)} (a Redis round trip per request) and ${perSecond(thousand)} IDs/s (a Redis round trip and 1,000 strings per request).`,
    );
  }

  await snowflakeServer(async (url) => {
    add('standalone Snowflake server `GET /api/snowflake/get/x`', await load(`${url}/api/snowflake/get/x`), 1);
  });

  return {
    title: 'HTTP API (autocannon)',
    body: [
      `Each server runs in its own process; autocannon (${CONNECTIONS} connections, ${DURATION_S} s, no pipelining) runs in the bench process, so both share the machine's ${os.availableParallelism()} cores. Command: \`npm run bench -- http\`.`,
      redisUrl
        ? `Redis pools use ${redisUrl.replace(/\/\/.*@/, '//')} (from REDIS_URL or .infra/env), with the refill worker in the server process.`
        : 'Redis rows skipped: no REDIS_URL and no .infra/env (run `npm run infra:up`).',
      '',
      table(['Route', 'requests/s', 'IDs/s', 'p50 ms', 'p99 ms', 'errors'], rows),
      ...(redisTargets.length > 0 ? ['', ...redisTargets] : []),
    ].join('\n'),
  };
}
