import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DemandStore } from '../../src/core/ports.js';
import { RedisPoolMeta } from '../../src/pool/redis/meta.js';
import { defineScripts } from '../../src/pool/redis/scripts.js';
import { uniqueName } from '../support/names.js';

// One contract for every DemandStore (where the Kafka pool watch keeps demand and its last
// reading), on the real server: a swap hands each stored reading to exactly one next reader, one
// caller of many takes a lease, and what is recorded is what the refill reads back.
interface Subject {
  demand: DemandStore;
  /** The refill side's reading of what was recorded: the demand rate and the burst rate, IDs/s. */
  rate(bizTag: string, shard: number): Promise<number>;
  burstRate(bizTag: string, shard: number): Promise<number>;
}

let redis: Redis;

const subjects: Record<string, () => Subject> = {
  redis: () => {
    const meta = new RedisPoolMeta({ redis, keyPrefix: `${uniqueName('demand')}:` });
    return { demand: meta, rate: (t, s) => meta.rate(t, s), burstRate: (t, s) => meta.burstRate(t, s) };
  },
};

beforeAll(() => {
  redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  defineScripts(redis);
});

afterAll(async () => {
  await redis?.quit();
});

describe.each(Object.keys(subjects))('DemandStore contract: %s', (name) => {
  let s: Subject;
  beforeAll(() => {
    s = subjects[name]!();
  });

  it('has no target and no reading for a pool it never saw', async () => {
    const bizTag = uniqueName('unseen');
    expect(await s.demand.target(bizTag, 0)).toBeNull();
    expect(await s.demand.swap(bizTag, 0, { committed: 7, at: 1 })).toEqual({ committed: null, at: null });
    expect(await s.demand.swap(bizTag, 0, { committed: 9, at: 2 })).toEqual({ committed: 7, at: 1 });
  });

  it('hands each stored reading to exactly one next reader, under concurrent swaps', async () => {
    const bizTag = uniqueName('swap');
    const values = Array.from({ length: 20 }, (_, i) => i + 1);
    const seen = await Promise.all(values.map((v) => s.demand.swap(bizTag, 0, { committed: v })));
    const last = await s.demand.swap(bizTag, 0, { committed: 0 });
    // The readings form one chain: null first, then every value once.
    const returned = [...seen, last].map((r) => r.committed);
    expect(returned.filter((v) => v === null)).toHaveLength(1);
    expect(returned.filter((v) => v !== null).sort((a, b) => a! - b!)).toEqual(values);
  });

  it('gives a lease to one caller of many', async () => {
    const name = uniqueName('lease');
    const taken = await Promise.all(Array.from({ length: 10 }, () => s.demand.lease(name, 60_000)));
    expect(taken.filter(Boolean)).toHaveLength(1);
  });

  it('records demand and a burst the refill reads back', async () => {
    const bizTag = uniqueName('record');
    expect(await s.rate(bizTag, 1)).toBe(0);
    await s.demand.record(bizTag, 1, 5000);
    expect(await s.rate(bizTag, 1)).toBeGreaterThan(0);
    await s.demand.recordBurst(bizTag, 1, 1234.5);
    expect(await s.burstRate(bizTag, 1)).toBe(1234.5);
    expect(await s.rate(bizTag, 0)).toBe(0);
  });
});
