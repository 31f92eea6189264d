/**
 * The client SDK against a spawned embedded server: `next()` from the prefetching double buffer
 * versus what a naive client does (one `GET /v1/ids/:tag?count=1` per ID over keep-alive fetch),
 * both with concurrent callers in this process. Reproduce: `npm run bench -- client`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createIdmintClient } from '../src/client/index.js';
import { spawnServer, type SpawnedServer } from '../test/support/spawn.js';
import { duplicatesInTyped, median, perSecond, table, type Section } from './lib.js';

const ROUNDS = 3;
const SDK_IDS = 2_000_000;
const NAIVE_IDS = 10_000;
const TAG = 'demo';

interface Result {
  rate: number;
  requests: number;
  duplicates: number;
}

/** `callers` async callers share one counter of IDs left; each stores its IDs into `out`. */
async function race(total: number, callers: number, take: () => Promise<bigint>): Promise<{ seconds: number; out: BigInt64Array }> {
  const out = new BigInt64Array(total);
  let next = 0;
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (next < total) {
        const slot = next++;
        out[slot] = await take();
      }
    }),
  );
  return { seconds: Number(process.hrtime.bigint() - t0) / 1e9, out };
}

async function sdk(server: SpawnedServer, callers: number): Promise<Result> {
  const client = createIdmintClient({ url: server.url, bizTags: [TAG] });
  try {
    await client.next(TAG);
    const { seconds, out } = await race(SDK_IDS, callers, () => client.next(TAG));
    return { rate: SDK_IDS / seconds, requests: client.stats()[0]?.fetches ?? 0, duplicates: duplicatesInTyped(out) };
  } finally {
    await client.close();
  }
}

async function naive(server: SpawnedServer, callers: number): Promise<Result> {
  const url = `${server.url}/v1/ids/${TAG}?count=1`;
  const { seconds, out } = await race(NAIVE_IDS, callers, async () => {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`${response.status} ${await response.text()}`);
    const body = (await response.json()) as { ids: string[] };
    return BigInt(body.ids[0] as string);
  });
  return { rate: NAIVE_IDS / seconds, requests: NAIVE_IDS, duplicates: duplicatesInTyped(out) };
}

async function rounds(fn: () => Promise<Result>): Promise<Result & { spread: string }> {
  const results: Result[] = [];
  for (let i = 0; i < ROUNDS; i++) results.push(await fn());
  const rates = results.map((r) => r.rate);
  return {
    rate: median(rates),
    requests: median(results.map((r) => r.requests)),
    duplicates: results.reduce((n, r) => n + r.duplicates, 0),
    spread: `${perSecond(Math.min(...rates))} – ${perSecond(Math.max(...rates))}`,
  };
}

export async function run(): Promise<Section> {
  // The embedded default: the distributed servers' variables would switch the server's topology.
  const saved = Object.fromEntries(['DATABASE_URL', 'REDIS_URL', 'KAFKA_BROKERS', 'ZK_CONNECT'].map((k) => [k, process.env[k]]));
  for (const key of Object.keys(saved)) delete process.env[key];
  const dataDir = mkdtempSync(join(tmpdir(), 'idmint-bench-client-'));
  const server = await spawnServer({ IDMINT_DATA_DIR: dataDir, LOG_LEVEL: 'warn' });
  try {
    const rows: Array<Array<string | number>> = [];
    for (const callers of [1, 64]) {
      const s = await rounds(() => sdk(server, callers));
      rows.push([`SDK \`next()\` (prefetch, adaptive batch)`, callers, SDK_IDS.toLocaleString('en'), perSecond(s.rate), s.spread, s.requests, s.duplicates]);
    }
    for (const callers of [1, 64]) {
      const n = await rounds(() => naive(server, callers));
      rows.push([`plain \`fetch\` of \`count=1\` per ID`, callers, NAIVE_IDS.toLocaleString('en'), perSecond(n.rate), n.spread, n.requests, n.duplicates]);
    }
    return {
      title: 'Client SDK: IDs/s from `next()` versus one HTTP request per ID',
      body: [
        `Embedded server (\`idmint serve\`, PGlite, in-memory double buffers) in its own process; callers in this process share one client (defaults: batch 1000 growing to 10000, prefetch at 20 %). Median of ${ROUNDS} rounds; "HTTP requests" is per round. Duplicates are counted over every round.`,
        '',
        table(['client', 'callers', 'IDs per round', 'IDs/s (median)', 'range', 'HTTP requests', 'duplicates'], rows),
      ].join('\n'),
    };
  } finally {
    await server.stop('SIGTERM');
    rmSync(dataDir, { recursive: true, force: true });
    for (const [key, value] of Object.entries(saved)) if (value !== undefined) process.env[key] = value;
  }
}
