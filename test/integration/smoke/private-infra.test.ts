import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { startPrivateServer } from '../../support/servers.js';
import type { PrivateServer } from '../../support/servers.js';
import { until } from '../../support/poll.js';

// The fault hooks others build on: a private server can crash, hang and come back, and the
// shared servers never notice.
describe('smoke: private servers for fault tests', () => {
  const opened: PrivateServer[] = [];
  afterAll(async () => {
    for (const s of opened) await s.close();
  });

  it('a private Redis loses its data on kill, answers again on start, and hangs while paused', async () => {
    const server = await startPrivateServer('redis');
    opened.push(server);
    expect(server.url).not.toBe(process.env.REDIS_URL);
    const options = { maxRetriesPerRequest: 0, commandTimeout: 500, enableOfflineQueue: false, retryStrategy: () => 100 };
    const redis = new Redis(server.url, { ...options, lazyConnect: true });
    redis.on('error', () => undefined);
    await redis.connect();
    try {
      const key = `smoke:${randomUUID()}`;
      await redis.set(key, '1');

      await server.kill();
      await expect(redis.get(key)).rejects.toThrow();

      await server.start();
      await until('Redis to answer', async () => (await redis.ping().catch(() => 'down')) === 'PONG', { timeoutMs: 10_000 });
      // No persistence: a crash is data loss, which is what invariant 1's tests need.
      expect(await redis.get(key)).toBeNull();

      await server.pause();
      await expect(redis.ping()).rejects.toThrow(/timed out/i);
      await server.resume();
      await until('Redis to answer', async () => (await redis.ping().catch(() => 'down')) === 'PONG', { timeoutMs: 10_000 });
    } finally {
      redis.disconnect();
    }
  });

  it('a private Postgres refuses connections while stopped and keeps its data across a restart', async () => {
    const server = await startPrivateServer('postgres');
    opened.push(server);
    const query = async (sql: string) => {
      const client = new pg.Client({ connectionString: server.url, connectionTimeoutMillis: 2000 });
      await client.connect();
      try {
        return await client.query(sql);
      } finally {
        await client.end();
      }
    };
    await query('CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)');

    await server.stop();
    await expect(query('SELECT 1')).rejects.toThrow();

    await server.start();
    expect((await query('SELECT v FROM kept')).rows).toEqual([{ v: 42 }]);
  });
});
