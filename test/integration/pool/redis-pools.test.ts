import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isIdmintError } from '../../../src/core/errors.js';
import type { RefillReason, RefillTrigger } from '../../../src/core/ports.js';
import { RedisCounterPool } from '../../../src/pool/redis/counter-pool.js';
import { RedisListPool } from '../../../src/pool/redis/list-pool.js';
import { RedisPoolMeta } from '../../../src/pool/redis/meta.js';
import { uid } from '../../support/names.js';
import { freePort } from '../../support/ports.js';
import { testTag } from '../../support/tags.js';
import { sleep } from '../../support/poll.js';
import { startPrivateServer } from '../../support/servers.js';
import { env } from '../../support/env.js';

const REDIS_URL = env('REDIS_URL');

/** A tag as the refill tests use it: a Redis list pool that refuses rather than falls back. */
const poolTag = (bizTag: string, overrides: Parameters<typeof testTag>[1] = {}) => testTag(bizTag, { fallback: 'error', pool: 'redis-list', ...overrides });

class RecordingTrigger implements RefillTrigger {
  readonly calls: Array<{ bizTag: string; shard: number; reason: RefillReason }> = [];
  async requestRefill(bizTag: string, shard: number, reason: RefillReason): Promise<void> {
    this.calls.push({ bizTag, shard, reason });
  }
}

const kinds = [
  ['redis-list', RedisListPool],
  ['redis-counter', RedisCounterPool],
] as const;

describe.each(kinds)('%s pool (real Redis)', (kind, Pool) => {
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });
  afterAll(() => redis.quit());

  const make = (extra: Partial<ConstructorParameters<typeof Pool>[0]> = {}) => {
    const keyPrefix = `test-${uid()}:`;
    return { keyPrefix, pool: new Pool({ redis, keyPrefix, ...extra }) };
  };

  it('hands out pushed segments in order, then fewer, then none', async () => {
    const { pool } = make();
    const tag = poolTag('order', { pool: kind });
    await pool.push({ bizTag: 'order', shard: 0, start: 1, end: 5 });
    await pool.push({ bizTag: 'order', shard: 0, start: 101, end: 103 });
    expect(await pool.depth('order', 0)).toBe(8);
    expect(await pool.take(tag, 6)).toEqual(['1', '2', '3', '4', '5', '101']);
    expect(await pool.take(tag, 5)).toEqual(['102', '103']);
    expect(await pool.take(tag, 5)).toEqual([]);
    expect(await pool.depth('order', 0)).toBe(0);
  });

  it('keeps IDs near 2^53 exact', async () => {
    const { pool } = make();
    const tag = poolTag('big', { pool: kind });
    await pool.push({ bizTag: 'big', shard: 0, start: 9007199254740989, end: 9007199254740991 });
    expect(await pool.take(tag, 10)).toEqual(['9007199254740989', '9007199254740990', '9007199254740991']);
  });

  it('keeps shards apart and removes every shard of a tag', async () => {
    const { pool, keyPrefix } = make();
    const tag = poolTag('sh', { pool: kind, mode: 'sharded', shards: 4 });
    await pool.push({ bizTag: 'sh', shard: 0, start: 1, end: 10 });
    await pool.push({ bizTag: 'sh', shard: 3, start: 1, end: 10 });
    expect(await pool.take(tag, 2, { shard: 3 })).toEqual(['1', '2']);
    expect(await pool.depth('sh', 0)).toBe(10);
    expect(await pool.depth('sh', 3)).toBe(8);
    expect(await redis.keys(`${keyPrefix}*`)).not.toHaveLength(0);
    await pool.remove('sh');
    expect(await redis.keys(`${keyPrefix}*`)).toEqual([]);
  });

  it('rejects a bad count with BAD_REQUEST from the script', async () => {
    const { pool } = make();
    await expect(pool.take(poolTag('x', { pool: kind }), 0)).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(pool.take(poolTag('x', { pool: kind }), 1.5)).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });

  it('asks for a refill when a take leaves the pool under 20 % of its target, and records demand', async () => {
    const trigger = new RecordingTrigger();
    const { pool, keyPrefix } = make({ refill: trigger, minDepth: 100, refillDebounceMs: 0 });
    const tag = poolTag('low', { pool: kind });
    await pool.push({ bizTag: 'low', shard: 0, start: 1, end: 100 });
    await pool.take(tag, 70); // 30 left: above 20
    expect(trigger.calls).toEqual([]);
    await pool.take(tag, 11); // 19 left: under 20
    expect(trigger.calls).toEqual([{ bizTag: 'low', shard: 0, reason: 'threshold' }]);
    const meta = new RedisPoolMeta({ redis, keyPrefix });
    await meta.setTarget('low', 0, 1000); // a larger target raises the threshold to 200
    await pool.take(tag, 1);
    expect(trigger.calls).toHaveLength(2);
    expect(await meta.rate('low', 0)).toBeGreaterThan(0);
  });

  it('drops a pool restored from an older snapshot instead of serving IDs again (fence)', async () => {
    const server = await startPrivateServer('redis');
    const client = new Redis(server.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 });
    client.on('error', () => {}); // refused connections while the server restarts
    try {
      const pool = new Pool({ redis: client });
      const tag = poolTag('snap', { pool: kind });
      await pool.push({ bizTag: 'snap', shard: 0, start: 1, end: 1000 });
      await client.save();
      const handedOut = await pool.take(tag, 300);
      expect(handedOut).toHaveLength(300);
      await server.kill();
      await sleep(300); // Redis stays down a while
      await server.start();
      await client.ping();
      expect(await pool.depth('snap', 0)).toBe(1000); // the snapshot brought them back...
      const after = await pool.take(tag, 1000); // ...but none is served again
      expect(after.filter((id) => handedOut.includes(id))).toEqual([]);
      expect(after).toEqual([]);
      await pool.push({ bizTag: 'snap', shard: 0, start: 5001, end: 5003 });
      expect(await pool.take(tag, 10)).toEqual(['5001', '5002', '5003']);
    } finally {
      client.disconnect();
      await server.close();
    }
  });

  it('fails fast with NOT_READY while Redis is unreachable', async () => {
    const dead = new Redis(`redis://127.0.0.1:${await freePort()}`, { retryStrategy: () => 1000, maxRetriesPerRequest: 0 });
    dead.on('error', () => {});
    try {
      const pool = new Pool({ redis: dead });
      const err = await pool.take(poolTag('down', { pool: kind }), 1).catch((e: unknown) => e);
      expect(isIdmintError(err) && err.code).toBe('NOT_READY');
    } finally {
      dead.disconnect();
    }
  });
});
