import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';
import { startPrivateServer, type PrivateServer } from '../support/servers.js';
import { expectNoDuplicates } from '../support/unique.js';
import { until } from '../support/poll.js';

// IDMINT_LOCAL_BUFFER: two api processes on one Postgres and one (private) Redis counter pool,
// each keeping a local buffer of blocks. Small requests from 24 callers while one process is
// SIGKILLed and replaced and Redis is restarted empty: zero duplicates, and most answers come
// from the pool without a Redis round trip each.
const run = Math.random().toString(36).slice(2, 10);
const schema = `localbuf_${run}`;
const TOKEN = 'local-buffer-admin';

describe('local block buffer over the Redis counter pool (IDMINT_LOCAL_BUFFER)', () => {
  let db: pg.Client;
  let redis: PrivateServer;
  const dirs: string[] = [];
  const servers: SpawnedServer[] = [];
  let env: (dir: string) => Record<string, string>;

  beforeAll(async () => {
    const url = process.env.DATABASE_URL;
    if (!url) throw new Error('DATABASE_URL is not set: the e2e global setup starts the local servers');
    db = new pg.Client({ connectionString: url });
    await db.connect();
    await db.query(`CREATE SCHEMA ${schema}`);
    redis = await startPrivateServer('redis');
    env = (dir) => ({
      DATABASE_URL: url,
      IDMINT_PG_SCHEMA: schema,
      IDMINT_DATA_DIR: dir,
      REDIS_URL: redis.url,
      IDMINT_ADMIN_TOKEN: TOKEN,
      IDMINT_LOCAL_BUFFER: '200',
      IDMINT_POOL_MIN_DEPTH: '5000',
      IDMINT_REFILL_EVERY_MS: '1000',
    });
    for (let i = 0; i < 2; i++) {
      const dir = mkdtempSync(join(tmpdir(), 'idmint-localbuf-'));
      dirs.push(dir);
      servers.push(await spawnServer(env(dir)));
    }
    const created = await fetch(`${servers[0]!.url}/v1/biz`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: '{"bizTag":"order","step":1000,"fallback":"segment"}',
    });
    expect(created.status).toBe(201);
  });

  afterAll(async () => {
    for (const s of servers) await s.stop('SIGKILL');
    await redis?.close();
    await db?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await db?.end();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('24 callers asking 1–5 IDs: zero duplicates across a SIGKILL, a replacement and a Redis restart', async () => {
    const ids: string[] = [];
    const sources = new Map<string, number>();
    const errors: string[] = [];
    let stop = false;
    const caller = async (n: number): Promise<void> => {
      for (let i = 0; !stop; i++) {
        const server = servers[(n + i) % servers.length]!;
        try {
          const response = await fetch(`${server.url}/v1/ids/order?count=${1 + ((n + i) % 5)}`);
          const body = (await response.json()) as { ids?: string[]; source?: string };
          if (body.ids) {
            ids.push(...body.ids);
            sources.set(body.source!, (sources.get(body.source!) ?? 0) + 1);
          } else errors.push(JSON.stringify(body));
        } catch (err) {
          // The process being killed: connection refused or reset. Anything else fails below.
          errors.push(`transport: ${String(err)}`);
        }
      }
    };
    const callers = Promise.all(Array.from({ length: 24 }, (_, n) => caller(n)));
    const waitIds = (n: number): Promise<void> =>
      until(`${n} IDs`, () => ids.length >= n, { intervalMs: 20, detail: () => `only ${ids.length} IDs; errors ${errors.slice(0, 3).join(' | ')}` });
    try {
      await waitIds(20_000);
      // The point of the buffer: far fewer take scripts in Redis than answered requests.
      const answered = [...sources.values()].reduce((a, b) => a + b, 0);
      const probe = new Redis(redis.url);
      const stats = await probe.info('commandstats');
      await probe.quit();
      const scripts = [...stats.matchAll(/cmdstat_(?:evalsha|eval|fcall):calls=(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
      expect(scripts).toBeGreaterThan(0);
      expect(scripts).toBeLessThan(answered / 5);
      const victim = servers[1]!;
      await victim.stop('SIGKILL');
      servers[1] = await spawnServer(env(dirs[1]!));
      await waitIds(ids.length + 10_000);
      await redis.restart(); // comes back empty: the pools refill from Postgres
      await waitIds(ids.length + 20_000);
    } finally {
      stop = true;
      await callers;
    }
    expectNoDuplicates(ids);
    expect(sources.get('pool') ?? 0).toBeGreaterThan(0);
    // Only the killed process's connections may fail; no answer is a server error.
    for (const e of errors) expect(e).toMatch(/transport|NOT_READY/);
  });
});
