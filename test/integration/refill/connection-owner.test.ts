import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { redisHandle } from '../../../src/redis/handle.js';
import { RefillQueue } from '../../../src/refill/queue.js';
import { RefillWorker } from '../../../src/refill/worker.js';
import type { RefillProcessor } from '../../../src/refill/processor.js';
import { uid } from '../../support/names.js';
import { env } from '../../support/env.js';
import { until } from '../../support/poll.js';

const REDIS_URL = env('REDIS_URL');

// One rule for Redis clients, as BullMQ's RedisConnection has: a URL opens a client that is
// closed with its user; a client passed in belongs to the caller and stays open.
const idle: RefillProcessor = {
  process: async () => ({ checked: 0, requested: [], removed: [] }),
  refill: async (bizTag, shard) => ({ status: 'skipped', bizTag, shard, why: 'test' }),
  sweep: async () => ({ checked: 0, requested: [], removed: [] }),
};

describe('who closes a Redis client (real Redis)', () => {
  it('redisHandle: a URL is owned and quit on close; a client is shared and left open', async () => {
    const owned = redisHandle(REDIS_URL, { maxRetriesPerRequest: null });
    expect(owned.owned).toBe(true);
    expect(await owned.client.ping()).toBe('PONG');
    await owned.close();
    await owned.close(); // idempotent
    await until('the owned client to end', () => owned.client.status === 'end', { timeoutMs: 5000 });

    const mine = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
    const shared = redisHandle(mine);
    expect(shared.owned).toBe(false);
    await shared.close();
    expect(await mine.ping()).toBe('PONG');
    await mine.quit();
  });

  it('RefillQueue and RefillWorker close what they opened from a URL, and only that', async () => {
    const name = `owner-${uid()}`;
    const mine = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
    const queueOnShared = new RefillQueue({ connection: mine, name });
    const workerOnShared = new RefillWorker({ connection: mine, name, processor: idle });
    await workerOnShared.waitUntilReady();
    await workerOnShared.close();
    await queueOnShared.close();
    expect(await mine.ping()).toBe('PONG');

    const queueOnUrl = new RefillQueue({ connection: REDIS_URL, name });
    const workerOnUrl = new RefillWorker({ connection: REDIS_URL, name, processor: idle });
    await workerOnUrl.waitUntilReady();
    const clients = [queueOnUrl.queue.opts.connection, workerOnUrl.worker.opts.connection] as Redis[];
    await workerOnUrl.close();
    await queueOnUrl.close();
    for (const client of clients) await until('the owned clients to end', () => client.status === 'end', { timeoutMs: 5000 });
    await mine.quit();
  });
});
