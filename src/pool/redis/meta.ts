import type { Redis } from 'ioredis';
import { BadRequestError } from '../../core/errors.js';
import type { DemandStore } from '../../core/ports.js';
import { poolKeys, trackedTagsKey } from './keys.js';
import { redisFailure, runScript } from './scripts.js';
import { checkInteger, defaults, resolveOptions } from '../../core/options.js';

export interface RedisPoolMetaOptions {
  redis: Redis;
  /** Prepended to every key (tests isolate by it). Default ''. */
  keyPrefix?: string;
  /** Width of a demand bucket, seconds; must match the pools' option. Default 10. */
  bucketSeconds?: number;
  /** Demand buckets kept in the ring; must match the pools' option. Default 30 (5 minutes). */
  slots?: number;
  /** Seconds of demand the rate is measured over. Default 180. */
  windowSeconds?: number;
}

/** How long a burst rate counts (RedisPoolMeta.recordBurst). */
export const BURST_TTL_MS = 10_000;

export const POOL_META_DEFAULTS = defaults({ keyPrefix: '', bucketSeconds: 10, slots: 30, windowSeconds: 180 });

/**
 * What the refill side knows about a Redis-backed pool: the demand recorded by the take
 * scripts, the target depth it last chose (takers read it to decide when to ask for a refill),
 * and which tags have pools at all (so a sweep can drop deleted tags' pools).
 */
export class RedisPoolMeta implements DemandStore {
  readonly options: Readonly<Required<Omit<RedisPoolMetaOptions, 'redis'>>>;
  private readonly redis: Redis;

  constructor(options: RedisPoolMetaOptions) {
    const { redis, ...rest } = options;
    this.options = resolveOptions(POOL_META_DEFAULTS, rest, (o) => {
      checkInteger('RedisPoolMeta', o, 'bucketSeconds', 1);
      checkInteger('RedisPoolMeta', o, 'slots', 2);
      checkInteger('RedisPoolMeta', o, 'windowSeconds', o.bucketSeconds, o.bucketSeconds * o.slots);
    });
    this.redis = redis;
  }

  /** IDs per second asked of this pool, over the window (or since demand was first seen in it). */
  async rate(bizTag: string, shard: number): Promise<number> {
    const { bucketSeconds, windowSeconds } = this.options;
    const res = await this.redis
      .multi()
      .time()
      .hgetall(poolKeys(this.options.keyPrefix, bizTag, shard).meta)
      .exec();
    if (!res || res[0]?.[0] || res[1]?.[0]) throw res?.[0]?.[0] ?? res?.[1]?.[0] ?? new Error('transaction aborted');
    const [sec, usec] = res[0]?.[1] as [string, string];
    const now = Number(sec) + Number(usec) / 1e6;
    const meta = res[1]?.[1] as Record<string, string>;
    const current = Math.floor(now / bucketSeconds);
    const oldestAllowed = current - Math.ceil(windowSeconds / bucketSeconds) + 1;
    let sum = 0;
    let oldest = current;
    for (const [field, value] of Object.entries(meta)) {
      if (field[0] !== 'e') continue;
      const bucket = Number(value);
      if (bucket < oldestAllowed || bucket > current) continue;
      sum += Number(meta[`c${field.slice(1)}`] ?? 0);
      oldest = Math.min(oldest, bucket);
    }
    // A young pool is measured over the time it has existed, so a burst is seen at once.
    const elapsed = Math.max(bucketSeconds, now - oldest * bucketSeconds);
    return sum / elapsed;
  }

  /** Records `count` IDs asked of a pool whose takes bypass the Redis scripts (Kafka pool topics). */
  async record(bizTag: string, shard: number, count: number): Promise<void> {
    const { keyPrefix, bucketSeconds, slots } = this.options;
    let code: unknown;
    try {
      code = await runScript(this.redis, 'idmintDemandRecord', [poolKeys(keyPrefix, bizTag, shard).meta, count, bucketSeconds, slots]);
    } catch (err) {
      throw redisFailure(`Redis (demand of "${bizTag}")`, err);
    }
    if (code === -1) throw new BadRequestError(`count must be a positive integer, got ${count}`, 'count');
  }

  async target(bizTag: string, shard: number): Promise<number | null> {
    const v = await this.redis.hget(poolKeys(this.options.keyPrefix, bizTag, shard).meta, 'target');
    return v === null ? null : Number(v);
  }

  async setTarget(bizTag: string, shard: number, target: number): Promise<void> {
    await this.redis.hset(poolKeys(this.options.keyPrefix, bizTag, shard).meta, 'target', String(target));
  }

  /**
   * Stores the values in the pool's meta and returns what was there, in one transaction: a
   * reading the next reader (in any process) compares against, e.g. a Kafka pool's committed offsets.
   */
  async swap<K extends string>(bizTag: string, shard: number, values: Record<K, number>): Promise<Record<K, number | null>> {
    const key = poolKeys(this.options.keyPrefix, bizTag, shard).meta;
    const fields = Object.keys(values) as K[];
    const res = await this.redis
      .multi()
      .hmget(key, ...fields)
      .hset(key, values)
      .exec();
    const old = (res?.[0]?.[1] ?? []) as Array<string | null>;
    return Object.fromEntries(fields.map((f, i) => [f, typeof old[i] === 'string' ? Number(old[i]) : null])) as Record<K, number | null>;
  }

  /**
   * A rate measured outside the demand ring (a Kafka pool's consumption between two readings of
   * its offsets), kept `BURST_TTL_MS`: the ring averages over at least one bucket, so a pool
   * whose demand jumps would otherwise be sized for a tenth of it for its first seconds.
   */
  async recordBurst(bizTag: string, shard: number, ratePerSecond: number): Promise<void> {
    await this.redis.hset(poolKeys(this.options.keyPrefix, bizTag, shard).meta, 'burst', String(ratePerSecond), 'burstAt', String(Date.now()));
  }

  /** The latest burst rate, or 0 when none was recorded in the last `BURST_TTL_MS`. */
  async burstRate(bizTag: string, shard: number): Promise<number> {
    const [rate, at] = await this.redis.hmget(poolKeys(this.options.keyPrefix, bizTag, shard).meta, 'burst', 'burstAt');
    if (rate === null || at === null || Date.now() - Number(at) > BURST_TTL_MS) return 0;
    return Number(rate);
  }

  /** True for the one caller that takes the named lease until it expires (a periodic job run by one process of many). */
  async lease(name: string, ms: number): Promise<boolean> {
    return (await this.redis.set(`${this.options.keyPrefix}idmint:lease:${name}`, String(process.pid), 'PX', ms, 'NX')) === 'OK';
  }

  async track(bizTag: string): Promise<void> {
    await this.redis.sadd(trackedTagsKey(this.options.keyPrefix), bizTag);
  }

  async untrack(bizTag: string): Promise<void> {
    await this.redis.srem(trackedTagsKey(this.options.keyPrefix), bizTag);
  }

  async tracked(): Promise<string[]> {
    return (await this.redis.smembers(trackedTagsKey(this.options.keyPrefix))).sort();
  }
}
