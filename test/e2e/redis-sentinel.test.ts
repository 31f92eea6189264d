import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../support/poll.js';
import { startRedisSentinels, type RedisSentinelSet } from '../support/redis-sentinel.js';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';
import { expectNoDuplicates } from '../support/unique.js';

const TOKEN = 'sentinel-admin-token';
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

const PASSWORD = 'sentinel-data-pw-1';
const SENTINEL_PASSWORD = 'sentinel-own-pw-2';

// Redis under Sentinel, secured as in production: the data nodes take an ACL user (the default
// user off) with a password (REDIS_URL's user and password)
// and so do the sentinels (REDIS_SENTINEL_PASSWORD); data nodes, their replication and the
// sentinels speak TLS only (REDIS_URL `rediss:`, IDMINT_REDIS_TLS_CA). idmint serve reaches the pools' Redis through
// REDIS_SENTINELS, its master is SIGKILLed under load, the sentinels promote the replica, and the
// pools serve again from it (the refill worker following), with every ID collected: zero duplicates.
describe('Redis pools under a Sentinel set on TLS, with an ACL user and passwords (REDIS_SENTINELS, REDIS_SENTINEL_PASSWORD, rediss://user:password@)', () => {
  let set: RedisSentinelSet;
  let server: SpawnedServer;
  let dataDir: string;

  beforeAll(async () => {
    set = await startRedisSentinels('idmint-pools', 1, { user: 'idmint-app', password: PASSWORD, sentinelPassword: SENTINEL_PASSWORD, tls: true });
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-sentinel-data-'));
    server = await spawnServer({
      ...set.env,
      IDMINT_DATA_DIR: dataDir,
      IDMINT_ADMIN_TOKEN: TOKEN,
      IDMINT_REFILL_EVERY_MS: '1000',
      IDMINT_POOL_MIN_DEPTH: '2000',
    });
  }, 120_000);

  afterAll(async () => {
    await server?.stop('SIGKILL');
    await set?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('serves from the pool before and after the master is killed and a replica promoted, zero duplicates', async () => {
    const created = await fetch(`${server.url}/v1/biz`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ bizTag: 'sentinel', step: 500, fallback: 'segment' }),
    });
    expect(created.status).toBe(201);
    const ids: string[] = [];
    const errors: string[] = [];
    let phase: 'before' | 'after' = 'before';
    const sources = { before: new Set<string>(), after: new Set<string>() };
    let running = true;
    const client = async (): Promise<void> => {
      while (running) {
        const response = await fetch(`${server.url}/v1/ids/sentinel?count=${1 + Math.floor(Math.random() * 50)}`);
        const body = (await response.json()) as { ids?: string[]; source?: string };
        if (!response.ok || !body.ids) {
          errors.push(`${response.status} ${JSON.stringify(body)}`);
          await new Promise((r) => setTimeout(r, 20));
          continue;
        }
        ids.push(...body.ids);
        sources[phase].add(body.source!);
      }
    };
    const clients = Promise.all(Array.from({ length: 8 }, () => client()));
    const detail = (): string =>
      `sources ${JSON.stringify({ before: [...sources.before], after: [...sources.after] })}; errors ${errors.length}: ${errors.slice(-3).join(' | ')}; the server's last output:\n${server.output().slice(-3000)}`;
    try {
      await until('IDs from the pool', () => sources.before.has('pool') && ids.length > 20_000, { timeoutMs: 60_000, detail });
      const { from, to } = await set.killMaster();
      phase = 'after';
      const at = ids.length;
      // ioredis asks the sentinels for the new master; the refill worker refills it (empty or
      // fenced: a promoted replica's pools are dropped, never served).
      await until('the pool serving from the promoted master', () => sources.after.has('pool') && ids.length > at + 20_000, { timeoutMs: 120_000, detail });
      console.log(`sentinel failover ${from} -> ${to}: ${ids.length} IDs, sources after ${[...sources.after].join(', ')}, ${errors.length} errors`);
    } finally {
      running = false;
      await clients;
    }
    expect(errors, detail()).toEqual([]);
    expectNoDuplicates(ids);
    // Neither password reaches the log.
    expect(server.output()).not.toMatch(new RegExp(`${PASSWORD}|${SENTINEL_PASSWORD}`));
  }, 300_000);
});
