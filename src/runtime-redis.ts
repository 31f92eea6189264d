import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Redis } from 'ioredis';
import type { Registry } from 'prom-client';
import type { Config } from './config.js';
import type { BizStore, PoolSink } from './core/types.js';
import type { PoolSources } from './dispenser.js';
import type { Logger } from './log.js';
import { RedisCounterPool } from './pool/redis-counter-pool.js';
import { RedisListPool } from './pool/redis-list-pool.js';
import { RedisPoolMeta } from './pool/redis-pool-meta.js';
import { loadRefillEnv } from './refill/env.js';
import type { SinkKind } from './refill/processor.js';
import { RefillQueue } from './refill/queue.js';
import { startRefillRole, type RefillRole } from './refill/role.js';
import { collectRefillStats } from './refill/stats.js';
import { dashboardExtension } from './http/dashboard.js';

export interface RedisPoolsOptions {
  config: Config;
  roles: ReadonlySet<string>;
  store: BizStore;
  registry: Registry;
  logger: Logger;
  closers: Array<{ name: string; close: () => Promise<void> | void }>;
  /** More sinks for the refill role, e.g. the Kafka pool-topic sink. */
  extraSinks?: Partial<Record<SinkKind, PoolSink>>;
}

export interface RedisPools {
  pools: PoolSources;
  /** Asks for a refill of a created or changed tag's pools, so its first requests find IDs. */
  prime(bizTag: string): void;
  check(): { ok: boolean; message?: string };
  stats(): Promise<Record<string, unknown>>;
  extensions: Array<(app: FastifyInstance, authorize: (request: FastifyRequest) => void) => Promise<void>>;
}

/**
 * Redis list and counter pools for the API role, their refill trigger, and (when the role is
 * on) the BullMQ refill worker and sweep scheduler. Nothing here blocks start-up on Redis: while
 * it is down the pools refuse with NOT_READY and the dispenser serves by each tag's fallback.
 */
export async function startRedisPools(options: RedisPoolsOptions): Promise<RedisPools> {
  const { config, roles, store, registry, logger, closers } = options;
  const url = config.REDIS_URL as string;
  const env = loadRefillEnv();
  const log = logger.child({ component: 'redis-pools' });
  // A take in flight when Redis dies fails within commandTimeout and falls back; it is never
  // resent on reconnect (it may have run: its IDs become a gap, never a repeat).
  const redis = new Redis(url, {
    maxRetriesPerRequest: 1,
    autoResendUnfulfilledCommands: false,
    commandTimeout: 1000,
    connectTimeout: 2000,
    retryStrategy: (times) => Math.min(times * 200, 2000),
  });
  redis.on('error', (err: Error) => log.debug({ err: err.message }, 'redis connection error'));
  let wasReady = false;
  redis.on('ready', () => {
    if (wasReady) log.info('redis is back; serving from pools again');
    wasReady = true;
  });
  redis.on('close', () => {
    if (wasReady) log.warn('redis connection lost; serving by each tag\'s fallback');
  });
  closers.push({ name: 'redis', close: () => redis.disconnect() });

  const queue = new RefillQueue({ connection: url, name: env.IDMINT_REFILL_QUEUE, prefix: env.IDMINT_REFILL_PREFIX, sweepEveryMs: config.IDMINT_REFILL_EVERY_MS, logger });
  closers.push({ name: 'refill queue', close: () => queue.close() });
  const common = { redis, keyPrefix: env.IDMINT_POOL_KEY_PREFIX, refill: queue, registry, logger, minDepth: env.IDMINT_POOL_MIN_DEPTH };
  const list = new RedisListPool(common);
  const counter = new RedisCounterPool(common);
  const meta = new RedisPoolMeta({ redis, keyPrefix: env.IDMINT_POOL_KEY_PREFIX });

  let role: RefillRole | undefined;
  if (roles.has('refill')) {
    // In the background: a refill worker waits for Redis; the API must not.
    const starting = startRefillRole({ config, refillEnv: env, store, logger, registry, queue, ...(options.extraSinks ? { extraSinks: options.extraSinks } : {}) }).then(
      (started) => {
        role = started;
        log.info({ queue: env.IDMINT_REFILL_QUEUE }, 'refill worker and sweep scheduler running');
        // Fill pools now rather than at the first cron tick, so early requests need no fallback.
        started.processor.sweep().catch((err: unknown) => log.warn({ err }, 'initial sweep failed; the cron sweep will retry'));
        return started;
      },
      (err: unknown) => {
        log.error({ err }, 'refill role failed to start');
        return undefined;
      },
    );
    closers.push({ name: 'refill role', close: async () => void (await (await starting)?.close()) });
  }

  return {
    pools: { 'redis-list': list, 'redis-counter': counter },
    prime: (bizTag) => {
      void store.getBiz(bizTag).then(
        async (tag) => {
          if (!tag || tag.mode !== 'segment') return;
          for (let shard = 0; shard < tag.shards; shard++) await queue.requestRefill(bizTag, shard, 'manual');
        },
        (err: unknown) => log.warn({ err, bizTag }, 'could not prime the pool of a changed tag'),
      );
    },
    check: () => (redis.status === 'ready' ? { ok: true } : { ok: false, message: `redis is ${redis.status}; serving by fallback` }),
    stats: async () => ({ ...(await collectRefillStats({ store, sinks: { 'redis-list': list, 'redis-counter': counter }, meta, queue })), refillRole: role ? 'running' : roles.has('refill') ? 'starting' : 'off' }),
    extensions: [dashboardExtension({ queues: [queue.queue] })],
  };
}
