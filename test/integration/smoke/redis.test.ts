import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';

// Proves the wiring: the global setup named a Redis that answers and keeps data.
describe('smoke: redis', () => {
  const redis = new Redis(process.env.REDIS_URL!, { lazyConnect: true, maxRetriesPerRequest: 1 });
  afterAll(async () => {
    await redis.quit();
  });

  it('reaches tests through process.env and inject()', () => {
    expect(process.env.REDIS_URL).toMatch(/^redis:\/\//);
    expect(inject('infraEnv').REDIS_URL).toBe(process.env.REDIS_URL);
  });

  it('round-trips a list push and pop', async () => {
    const key = `smoke:${randomUUID()}`;
    await redis.rpush(key, '1', '2', '3');
    await redis.pexpire(key, 60_000);
    expect(await redis.lpop(key, 2)).toEqual(['1', '2']);
    expect(await redis.llen(key)).toBe(1);
    expect(await redis.del(key)).toBe(1);
  });

  it('runs with no eviction, so pooled IDs are never silently dropped', async () => {
    const [, policy] = (await redis.config('GET', 'maxmemory-policy')) as [string, string];
    expect(policy).toBe('noeviction');
  });
});
