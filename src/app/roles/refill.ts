import type { Registry } from 'prom-client';
import type { Logger } from '../../core/logger.js';
import type { BizStore, PoolSink } from '../../core/ports.js';
import { createRefillProcessor, type RefillProcessor, type SinkKind } from '../../refill/processor.js';
import { RefillWorker } from '../../refill/worker.js';
import type { Config } from '../config.js';
import { testHooks } from '../test-hooks.js';
import { refillPrefix } from '../connections.js';
import type { RedisPools } from '../pools.js';
import { DEFAULT_REDIS_POOL } from '../../core/pool-kind.js';
import type { KafkaPoolSink } from '../../pool/kafka/sink.js';
import { KafkaPoolWatch } from '../../pool/kafka/watch.js';
import { recordingRefills } from '../../dashboard/refill-log.js';
import type { DashboardStore } from '../../dashboard/store.js';
import { PROCESS_ID } from '../dashboard.js';
import type { DeploymentWatch } from '../../deployment/watch.js';

export interface RefillRoleOptions {
  config: Config;
  store: Pick<BizStore, 'getBiz' | 'listBiz' | 'allocate'>;
  redis: RedisPools;
  /** The Kafka pool-topic sink, when the process has Kafka. */
  kafkaSink?: KafkaPoolSink | undefined;
  /** Where each refill's result goes for the dashboard's timeline. */
  refillLog?: DashboardStore | undefined;
  logger: Logger;
  registry?: Registry;
  /** The deployment record: while this process may not allocate segments, it takes no refill job. */
  deployment?: Pick<DeploymentWatch, 'refusal' | 'onChange'>;
}

export interface RefillRole {
  readonly worker: RefillWorker;
  readonly processor: RefillProcessor;
  /** Idempotent: stops taking jobs and waits for running ones. The pools and queue belong to the caller. */
  close(): Promise<void>;
}

/** The refill role: a BullMQ worker and the sweep scheduler, filling the process's pools from the store. */
export async function startRefillRole(options: RefillRoleOptions): Promise<RefillRole> {
  const { config, store, redis, logger, registry } = options;
  const sinks: Partial<Record<SinkKind, PoolSink>> = {
    'redis-list': redis.list,
    'redis-counter': redis.counter,
    ...(options.kafkaSink ? { kafka: options.kafkaSink } : {}),
  };
  const filling = createRefillProcessor({
    store,
    sinks,
    autoKind: DEFAULT_REDIS_POOL,
    meta: redis.meta,
    trigger: redis.queue,
    poolSeconds: config.IDMINT_POOL_SECONDS,
    minDepth: config.IDMINT_POOL_MIN_DEPTH,
    maxDepth: config.IDMINT_POOL_MAX_DEPTH,
    maxRangeDepth: config.IDMINT_POOL_MAX_RANGE_DEPTH,
    pauseAfterAllocateMs: testHooks().pauseAfterAllocateMs,
    logger,
    ...(registry ? { registry } : {}),
  });
  const processor = options.refillLog ? recordingRefills(filling, options.refillLog, PROCESS_ID, logger) : filling;
  const worker = new RefillWorker({
    // The pools' patient client: BullMQ duplicates it for its blocking reads and never closes it.
    connection: redis.connection.patient,
    processor,
    name: config.IDMINT_REFILL_QUEUE,
    prefix: refillPrefix(config),
    concurrency: config.IDMINT_REFILL_CONCURRENCY,
    lockDurationMs: config.IDMINT_REFILL_LOCK_MS,
    stalledIntervalMs: Math.max(100, Math.floor(config.IDMINT_REFILL_LOCK_MS / 2)),
    logger,
  });
  try {
    await worker.waitUntilReady();
    await redis.queue.scheduleSweeps();
  } catch (err) {
    await worker.close();
    throw err;
  }
  // Redis back after an outage: sweep now, so pools refill (a restarted Redis may have lost them) without waiting for the schedule.
  worker.onRedisBack = () => {
    redis.queue
      .sweepNow()
      .catch((err: unknown) => logger.debug({ err: (err as Error).message }, 'could not request a sweep after Redis came back; the schedule will run one'));
  };
  // Redis data loss (FLUSHALL, a restart without persistence) removes BullMQ's scheduler keys:
  // re-assert the sweep on every sweep interval (an idempotent upsert), or cron refills and
  // deleted-tag cleanup would stop until a restart.
  const reassert = setInterval(() => {
    redis.queue
      .scheduleSweeps()
      .catch((err: unknown) => logger.debug({ err: (err as Error).message }, 'could not re-assert the sweep scheduler; retrying next interval'));
  }, config.IDMINT_REFILL_EVERY_MS);
  reassert.unref();
  // Kafka pool topics: demand and threshold refills from their committed offsets (the SDK consumers have no Redis).
  const watch = options.kafkaSink
    ? new KafkaPoolWatch({
        sink: options.kafkaSink,
        store,
        meta: redis.meta,
        trigger: redis.queue,
        autoKind: DEFAULT_REDIS_POOL,
        everyMs: config.IDMINT_KAFKA_POOL_WATCH_MS,
        minDepth: config.IDMINT_POOL_MIN_DEPTH,
        logger,
      })
    : undefined;
  watch?.start();
  // A process that differs from the deployment's fence takes no job: another worker fills the pools.
  const holdJobs = (): void => {
    const reason = options.deployment?.refusal('segments');
    if (reason !== undefined) worker.pause(reason);
    else worker.resume();
  };
  const stopHolding = options.deployment?.onChange(holdJobs);
  holdJobs();
  const close = async (): Promise<void> => {
    stopHolding?.();
    clearInterval(reassert);
    await watch?.close();
    await worker.close();
  };
  return Object.freeze({ worker, processor, close });
}
