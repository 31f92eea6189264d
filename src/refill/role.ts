import { Redis } from 'ioredis';
import type { Registry } from 'prom-client';
import type { Config } from '../config.js';
import { IdmintError } from '../core/errors.js';
import type { BizStore, PoolSink } from '../core/types.js';
import type { Logger } from '../log.js';
import { RedisCounterPool } from '../pool/redis-counter-pool.js';
import { RedisListPool } from '../pool/redis-list-pool.js';
import { RedisPoolMeta } from '../pool/redis-pool-meta.js';
import type { RefillEnv } from './env.js';
import { createRefillProcessor, type RefillProcessor, type SinkKind } from './processor.js';
import { RefillQueue } from './queue.js';
import { RefillWorker } from './worker.js';

export interface RefillRoleOptions {
  config: Pick<Config, 'REDIS_URL' | 'IDMINT_REFILL_EVERY_MS' | 'IDMINT_POOL_SECONDS'>;
  refillEnv: RefillEnv;
  store: Pick<BizStore, 'getBiz' | 'listBiz' | 'allocate'>;
  logger: Logger;
  registry?: Registry;
  /** Extra sinks, e.g. the Kafka pool sink; Redis list and counter sinks are always present. */
  extraSinks?: Partial<Record<SinkKind, PoolSink>>;
  /** A queue the process already has (the API's refill trigger); its owner closes it. Default: a new one. */
  queue?: RefillQueue;
}

export interface RefillRole {
  readonly queue: RefillQueue;
  readonly worker: RefillWorker;
  readonly processor: RefillProcessor;
  /** Idempotent: stops taking jobs, waits for running ones, closes Redis clients. */
  close(): Promise<void>;
}

/** The refill role of a process: worker, sweep scheduler and the sinks it fills. */
export async function startRefillRole(options: RefillRoleOptions): Promise<RefillRole> {
  const { config, refillEnv: env, store, logger, registry } = options;
  if (!config.REDIS_URL) throw new IdmintError('BAD_REQUEST', 'the refill role needs REDIS_URL');
  // Never resend a push whose reply was lost: it may have run, and a second run would pool the same
  // IDs twice. The job fails instead, and its retry takes a new segment (invariant 3).
  const redis = new Redis(config.REDIS_URL, { maxRetriesPerRequest: null, autoResendUnfulfilledCommands: false });
  const keyPrefix = env.IDMINT_POOL_KEY_PREFIX;
  const meta = new RedisPoolMeta({ redis, keyPrefix });
  const sinks: Partial<Record<SinkKind, PoolSink>> = {
    'redis-list': new RedisListPool({ redis, keyPrefix, logger, registry, minDepth: env.IDMINT_POOL_MIN_DEPTH }),
    'redis-counter': new RedisCounterPool({ redis, keyPrefix, logger, registry, minDepth: env.IDMINT_POOL_MIN_DEPTH }),
    ...options.extraSinks,
  };
  const ownQueue = options.queue === undefined;
  const queue = options.queue ?? new RefillQueue({ connection: redis, name: env.IDMINT_REFILL_QUEUE, prefix: env.IDMINT_REFILL_PREFIX, sweepEveryMs: config.IDMINT_REFILL_EVERY_MS, logger });
  const processor = createRefillProcessor({
    store,
    sinks,
    meta,
    trigger: queue,
    poolSeconds: config.IDMINT_POOL_SECONDS,
    minDepth: env.IDMINT_POOL_MIN_DEPTH,
    maxDepth: env.IDMINT_POOL_MAX_DEPTH,
    pauseAfterAllocateMs: env.IDMINT_REFILL_PAUSE_AFTER_ALLOCATE_MS,
    logger,
    registry,
  });
  const worker = new RefillWorker({
    connection: config.REDIS_URL,
    processor,
    name: env.IDMINT_REFILL_QUEUE,
    prefix: env.IDMINT_REFILL_PREFIX,
    concurrency: env.IDMINT_REFILL_CONCURRENCY,
    lockDurationMs: env.IDMINT_REFILL_LOCK_MS,
    stalledIntervalMs: Math.max(100, Math.floor(env.IDMINT_REFILL_LOCK_MS / 2)),
    logger,
  });
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      await worker.close();
      if (ownQueue) await queue.close();
      redis.disconnect();
    })());
  try {
    await worker.waitUntilReady();
    await queue.scheduleSweeps();
  } catch (err) {
    await close();
    throw err;
  }
  return Object.freeze({ queue, worker, processor, close });
}
