import type { Registry } from 'prom-client';
import type { Logger } from '../core/logger.js';
import type { SigningKey } from '../kafka/signing.js';
import { redisTarget, refillPrefix, usesRedis } from './connections.js';
import { kafkaFor } from './kafka-client.js';
import { KafkaPoolSink } from '../pool/kafka/sink.js';
import { RedisConnection } from '../pool/redis/connection.js';
import { RedisCounterPool } from '../pool/redis/counter-pool.js';
import { RedisListPool } from '../pool/redis/list-pool.js';
import { RedisPoolMeta } from '../pool/redis/meta.js';
import { RefillQueue } from '../refill/queue.js';
import type { Closers } from './closers.js';
import type { Config } from './config.js';

/** A process's Redis side, opened once and shared by its roles: the API takes from the pools, the refill role pushes to them. */
export interface RedisPools {
  readonly connection: RedisConnection;
  readonly list: RedisListPool;
  readonly counter: RedisCounterPool;
  /** Pool metadata for refills (waits for Redis). */
  readonly meta: RedisPoolMeta;
  /** The same metadata for /v1/stats, on the serving client: fails fast while Redis is down. */
  readonly statsMeta: RedisPoolMeta;
  /** The refill queue: threshold requests from the pools, the sweep scheduler, the worker's jobs. */
  readonly queue: RefillQueue;
}

/**
 * Opens Redis pools from the config. Nothing here waits for Redis: while it is down the pools
 * refuse with NOT_READY and the dispenser serves by each tag's fallback.
 */
export function openRedisPools(config: Config, deps: { logger: Logger; registry?: Registry; closers: Closers }): RedisPools {
  const { logger, registry, closers } = deps;
  if (!usesRedis(config)) throw new Error('openRedisPools: none of REDIS_URL, REDIS_SENTINELS, REDIS_CLUSTER_NODES is set');
  const target = redisTarget(config);
  const connection = new RedisConnection({ url: target.url, redis: target.options, cluster: target.cluster, logger });
  closers.add('redis', () => connection.close());
  const queue = new RefillQueue({
    connection: connection.patient,
    name: config.IDMINT_REFILL_QUEUE,
    prefix: refillPrefix(config),
    sweepEveryMs: config.IDMINT_REFILL_EVERY_MS,
    logger,
  });
  closers.add('refill queue', () => queue.close());
  const common = {
    redis: connection.fast,
    pushRedis: connection.patient,
    keyPrefix: config.IDMINT_POOL_KEY_PREFIX,
    refill: queue,
    minDepth: config.IDMINT_POOL_MIN_DEPTH,
    logger,
    ...(registry ? { registry } : {}),
  };
  return Object.freeze({
    connection,
    list: new RedisListPool(common),
    counter: new RedisCounterPool(common),
    meta: new RedisPoolMeta({ redis: connection.patient, keyPrefix: config.IDMINT_POOL_KEY_PREFIX }),
    statsMeta: new RedisPoolMeta({ redis: connection.fast, keyPrefix: config.IDMINT_POOL_KEY_PREFIX }),
    queue,
  });
}

/** The Kafka pool-topic sink refills publish to, when KAFKA_BROKERS is set. */
export function openKafkaPoolSink(
  config: Config,
  deps: { logger: Logger; registry?: Registry; closers: Closers; signer: () => SigningKey | undefined },
): KafkaPoolSink | undefined {
  if (!config.KAFKA_BROKERS) return undefined;
  const sink = new KafkaPoolSink({
    kafka: kafkaFor(config, 'idmint-refill', deps.logger),
    partitions: config.IDMINT_KAFKA_POOL_PARTITIONS,
    replicationFactor: config.IDMINT_KAFKA_REPLICATION_FACTOR,
    signer: deps.signer,
    namespace: config.IDMINT_KAFKA_NAMESPACE,
    logger: deps.logger,
    ...(deps.registry ? { registry: deps.registry } : {}),
  });
  deps.closers.add('kafka pool sink', () => sink.close());
  return sink;
}
