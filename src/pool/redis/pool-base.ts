import type { Redis } from 'ioredis';
import type { Registry } from 'prom-client';
import { blocksSize, idsOf, type Block } from '../../core/block.js';
import { notReady } from '../../core/errors.js';
import type { BizTag, IdSource, PoolSink, RefillTrigger, Segment, TakeContext } from '../../core/ports.js';
import { silentLogger, type Logger } from '../../core/logger.js';
import { allTagKeys, poolKeys, type PoolKeys } from './keys.js';
import { redisPoolMetrics, type RedisPoolMetrics } from './metrics.js';
import { redisFailure, type TakeReply } from './scripts.js';
import { checkInteger, defaults, OptionsError, resolveOptions } from '../../core/options.js';

export interface RedisPoolOptions {
  /** The client for takes and reads: the serving path, which should fail fast. */
  redis: Redis;
  /** The client for pushes and removals, which may wait for Redis (refills). Default `redis`. */
  pushRedis?: Redis;
  /** Prepended to every key (tests isolate by it). Default ''. */
  keyPrefix?: string;
  /** Where to ask for refills; without one the pool only drains (a cron sweep may still fill it). */
  refill?: RefillTrigger;
  /** A take that leaves fewer than `thresholdRatio × target` IDs asks for a refill. Default 0.2. */
  thresholdRatio?: number;
  /** Target depth assumed until the refill processor has set one. Default 1000. */
  minDepth?: number;
  /** At most one refill request per tag/shard from this process within this window. Default 250 ms. */
  refillDebounceMs?: number;
  /**
   * Drop pools written by another Redis run (restored snapshot, failover) before serving. Default
   * true. Costs an INFO call per script (~30 % of take throughput at batch 1, bench/RESULTS.md);
   * turn off only for a Redis that can never bring old data back (no RDB/AOF, no replicas).
   */
  fence?: boolean;
  /** Demand bucket width, seconds (must match RedisPoolMeta). Default 10. */
  bucketSeconds?: number;
  /** Demand buckets kept (must match RedisPoolMeta). Default 30. */
  slots?: number;
  /** IDs per push command. Default 10000. */
  pushChunk?: number;
  /** pino logger. Default silent. */
  logger?: Logger;
  /** prom-client registry for pool metrics. Default none. */
  registry?: Registry;
}

export const REDIS_POOL_DEFAULTS = defaults({
  keyPrefix: '',
  thresholdRatio: 0.2,
  minDepth: 1000,
  refillDebounceMs: 250,
  fence: true,
  bucketSeconds: 10,
  slots: 30,
  pushChunk: 10_000,
});

type Settings = typeof REDIS_POOL_DEFAULTS;

function validate(o: Settings): void {
  if (!(o.thresholdRatio > 0 && o.thresholdRatio <= 1)) throw new OptionsError('RedisPool', 'thresholdRatio', 'must be in (0, 1]');
  checkInteger('RedisPool', o, 'minDepth', 1);
  checkInteger('RedisPool', o, 'refillDebounceMs', 0);
  checkInteger('RedisPool', o, 'bucketSeconds', 1);
  checkInteger('RedisPool', o, 'slots', 2);
  checkInteger('RedisPool', o, 'pushChunk', 1, 100_000);
}

const watched = new WeakSet<Redis>();
const wasReady = new WeakSet<Redis>();

/** Remembers that a client has been ready once (one listener per client, however many pools share it). */
function watchReady(redis: Redis): void {
  if (watched.has(redis)) return;
  watched.add(redis);
  if (redis.status === 'ready') wasReady.add(redis);
  redis.once('ready', () => wasReady.add(redis));
}

/** What a take script gave: a list pool's IDs, or a counter pool's ranges as blocks. */
export type Taken = { ids: string[]; blocks?: undefined; reply: TakeReply } | { ids?: undefined; blocks: Block[]; reply: TakeReply };

/**
 * What list and counter pools share: the take path (one script call, then a refill request when
 * the pool runs low), Redis failures as NOT_READY, metrics, and removal.
 */
export abstract class RedisPoolBase implements IdSource, PoolSink {
  readonly name = 'pool' as const;
  abstract readonly kind: 'redis-list' | 'redis-counter';
  readonly settings: Readonly<Settings>;
  protected readonly redis: Redis;
  protected readonly pushRedis: Redis;
  protected readonly logger: Logger;
  protected readonly metrics: RedisPoolMetrics | undefined;
  private readonly refill: RefillTrigger | undefined;
  private readonly lastRequest = new Map<string, number>();

  constructor(options: RedisPoolOptions, component: string) {
    const { redis, pushRedis, refill, logger, registry, ...rest } = options;
    this.settings = resolveOptions<Settings>(REDIS_POOL_DEFAULTS as Settings, rest, validate);
    this.redis = redis;
    watchReady(redis);
    this.pushRedis = pushRedis ?? redis;
    this.refill = refill;
    this.logger = (logger ?? silentLogger).child({ component });
    this.metrics = redisPoolMetrics(registry);
  }

  protected keys(bizTag: string, shard: number): PoolKeys {
    return poolKeys(this.settings.keyPrefix, bizTag, shard);
  }

  /** Runs the kind's take script; returns the IDs (a list, or ranges as blocks) and the script's view of the pool. */
  protected abstract takeFrom(keys: PoolKeys, count: number): Promise<Taken>;
  abstract depth(bizTag: string, shard: number): Promise<number>;
  abstract push(segment: Segment): Promise<void>;

  async take(tag: BizTag, count: number, context: TakeContext = {}): Promise<string[]> {
    const taken = await this.takeTaken(tag, count, context);
    return taken.ids ?? idsOf(taken.blocks);
  }

  /** One take script call, with its metrics and refill request; what callers of take and takeBlocks share. */
  protected async takeTaken(tag: BizTag, count: number, context: TakeContext): Promise<Taken> {
    const shard = context.shard ?? (tag.shards > 1 ? Math.floor(Math.random() * tag.shards) : 0);
    this.assertConnected(`${this.kind} pool`);
    let result: Taken;
    try {
      result = await this.takeFrom(this.keys(tag.bizTag, shard), count);
    } catch (err) {
      throw redisFailure(`Redis (${this.kind} pool of "${tag.bizTag}")`, err);
    }
    const { reply } = result;
    const got = result.ids ? result.ids.length : blocksSize(result.blocks);
    if (reply.code === 1) {
      this.logger.warn({ bizTag: tag.bizTag, shard }, 'dropped a pool written by another Redis run (restart from snapshot or failover); it will be refilled');
    }
    this.metrics?.taken.inc({ biz_tag: tag.bizTag, kind: this.kind }, got);
    this.metrics?.depth.set({ biz_tag: tag.bizTag, shard: String(shard), kind: this.kind }, reply.remaining);
    const target = reply.target > 0 ? reply.target : this.settings.minDepth;
    if (got < count || reply.remaining < target * this.settings.thresholdRatio) {
      this.requestRefill(tag.bizTag, shard);
    }
    return result;
  }

  /** The IdSource side of `remove`: a tag whose counters moved drops its pooled IDs (gaps, never reused). */
  forget(bizTag: string): Promise<void> {
    return this.remove(bizTag);
  }

  async remove(bizTag: string): Promise<void> {
    try {
      await this.pushRedis.unlink(...allTagKeys(this.settings.keyPrefix, bizTag));
    } catch (err) {
      throw redisFailure(`Redis (removing pool of "${bizTag}")`, err);
    }
  }

  protected assertConnected(what: string): void {
    // Fail fast while the link is down instead of queueing: the dispenser falls back by policy.
    // The first connect is waited for (its commands sit in ioredis's offline queue briefly); a
    // reconnect is not: to a dead server each attempt held the takes queued behind it until the
    // command timeout, a second-long stall every few seconds of an outage.
    const status = this.redis.status;
    if (status === 'reconnecting' || status === 'close' || status === 'end' || (status === 'connecting' && wasReady.has(this.redis))) {
      throw notReady(`Redis (${what})`, `connection is ${status}`, 'redis');
    }
  }

  protected recordPushed(segment: Segment, depth: number, code: number): void {
    if (code === 1) this.logger.warn({ bizTag: segment.bizTag, shard: segment.shard }, 'dropped a stale pool (another Redis run) before pushing');
    this.metrics?.depth.set({ biz_tag: segment.bizTag, shard: String(segment.shard), kind: this.kind }, depth);
  }

  private requestRefill(bizTag: string, shard: number): void {
    if (!this.refill) return;
    const key = `${bizTag}:${shard}`;
    const now = Date.now();
    if (now - (this.lastRequest.get(key) ?? -Infinity) < this.settings.refillDebounceMs) return;
    this.lastRequest.set(key, now);
    this.metrics?.refillRequests.inc({ biz_tag: bizTag, kind: this.kind });
    // Fire and forget: the caller has its IDs; a lost request is caught by the cron sweep.
    this.refill.requestRefill(bizTag, shard, 'threshold').catch((err: unknown) => {
      this.logger.warn({ err, bizTag, shard }, 'could not enqueue a refill');
    });
  }
}
