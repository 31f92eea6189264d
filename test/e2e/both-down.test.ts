import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';
import { startPrivateServer, type PrivateServer } from '../support/servers.js';
import { expectNoDuplicates } from '../support/unique.js';
import { until } from '../support/poll.js';

// The last rung of a segment tag's fallback ladder, on real servers: with Redis and Postgres both
// killed, a tag with fallback `snowflake` is served Snowflake IDs (source "snowflake", 63-bit),
// a tag with fallback `error` gets 503 NOT_READY with the error JSON, and blocks answer NOT_READY
// (a Snowflake ID is not a block). After both return, the pools serve again; zero duplicates.
const TOKEN = 'both-down-admin';
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

describe('segment tags with Redis and Postgres down (fallback snowflake / error)', () => {
  let redis: PrivateServer;
  let postgres: PrivateServer;
  let server: SpawnedServer;
  let dataDir: string;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-both-down-'));
    [redis, postgres] = await Promise.all([startPrivateServer('redis'), startPrivateServer('postgres')]);
    server = await spawnServer({
      IDMINT_DATA_DIR: dataDir,
      IDMINT_ADMIN_TOKEN: TOKEN,
      REDIS_URL: redis.url,
      DATABASE_URL: postgres.url,
      IDMINT_POOL_MIN_DEPTH: '2000',
    });
    for (const [bizTag, fallback] of [
      ['pay', 'snowflake'],
      ['refund', 'error'],
    ] as const) {
      const response = await fetch(`${server.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify({ bizTag, step: 500, fallback }) });
      expect(response.status, await response.clone().text()).toBe(201);
    }
  });

  afterAll(async () => {
    await server?.stop('SIGKILL');
    await Promise.all([redis?.close(), postgres?.close()]);
    rmSync(dataDir, { recursive: true, force: true });
  });

  const get = async (
    bizTag: string,
    count: number,
  ): Promise<{ status: number; body: { ids?: string[]; source?: string; error?: { code: string; message: string } } }> => {
    const response = await fetch(`${server.url}/v1/ids/${bizTag}?count=${count}`);
    return { status: response.status, body: (await response.json()) as never };
  };

  it('serves Snowflake for fallback snowflake, NOT_READY for fallback error, and the pools again after', async () => {
    // Uniqueness is per tag: both tags start at 1.
    const seen = { pay: [] as string[], refund: [] as string[] };
    for (let i = 0; i < 20; i++) {
      for (const tag of ['pay', 'refund'] as const) {
        const { status, body } = await get(tag, 50);
        expect(status, JSON.stringify(body)).toBe(200);
        seen[tag].push(...body.ids!);
      }
    }

    await Promise.all([redis.kill(), postgres.kill()]);
    const down = { pay: new Map<string, number>(), refund: new Map<string, number>() };
    for (let i = 0; i < 200; i++) {
      for (const tag of ['pay', 'refund'] as const) {
        const { status, body } = await get(tag, 20);
        const key = status === 200 ? `200 ${body.source}` : `${status} ${body.error?.code}`;
        down[tag].set(key, (down[tag].get(key) ?? 0) + 1);
        if (body.ids) seen[tag].push(...body.ids);
        if (status !== 200) expect(body.error?.message).toBeTruthy();
        if (body.source === 'snowflake') for (const id of body.ids!) expect(BigInt(id) >= 1n << 53n).toBe(true);
      }
    }
    // Whatever the memory of the last pool take still held may serve first; then the last rung.
    expect(down.pay.get('200 snowflake') ?? 0).toBeGreaterThan(150);
    expect([...down.pay.keys()].every((k) => k.startsWith('200'))).toBe(true);
    expect(down.refund.get('503 NOT_READY') ?? 0).toBeGreaterThan(150);
    expect([...down.refund.keys()].every((k) => k === '503 NOT_READY' || k === '200 pool')).toBe(true);
    const blocks = await fetch(`${server.url}/v1/blocks/pay?count=10`);
    expect(blocks.status).toBe(503);
    expect(((await blocks.json()) as { error: { code: string } }).error.code).toBe('NOT_READY');

    await Promise.all([redis.start(), postgres.start()]);
    const back = new Set<string>();
    await until(
      'the pools to serve again',
      async () => {
        for (const tag of ['pay', 'refund'] as const) {
          const { status, body } = await get(tag, 20);
          if (status === 200) {
            back.add(`${tag}:${body.source}`);
            seen[tag].push(...body.ids!);
          }
        }
        return back.has('pay:pool') && back.has('refund:pool');
      },
      { intervalMs: 100, detail: () => `sources seen: ${[...back].join(', ')}` },
    );
    for (const ids of Object.values(seen)) expectNoDuplicates(ids);
  });
});
