import { hostname } from 'node:os';
import type { Registry } from 'prom-client';
import { SHARDED_LAYOUT } from '../core/sharded.js';
import type { Logger } from '../core/logger.js';
import type { BizStore, ChangeFeed } from '../core/ports.js';
import { Dispenser, type PoolSources } from '../dispenser/dispenser.js';
import type { DispenserMetrics } from '../dispenser/metrics.js';
import { LocalBlockBuffer } from '../dispenser/sources/local-buffer.js';
import { MemoryPool } from '../dispenser/sources/memory.js';
import { segmentSource } from '../dispenser/sources/segment.js';
import { ShardedSource } from '../dispenser/sources/sharded.js';
import type { SnowflakeSource } from '../dispenser/sources/snowflake.js';
import { UidSource } from '../dispenser/sources/uid.js';
import type { Database } from '../store/db.js';
import { PostgresWorkerIdProvider } from '../worker-id/postgres-provider.js';
import { RegionalWorkerIdProvider } from '../worker-id/regional-provider.js';
import type { Closers } from './closers.js';
import { regionOf, type Config } from './config.js';
import type { RedisPools } from './pools.js';
import { fileClock, testHooks } from './test-hooks.js';
import { createSnowflakeSourceFromConfig } from './worker-id.js';
import { DEFAULT_REDIS_POOL } from '../core/pool-kind.js';
import { TagFormats } from './formats.js';
import type { Deployment } from './deployment.js';
import { GuardedWorkerIdProvider } from '../worker-id/guarded-provider.js';

export interface DispenserParts {
  dispenser: Dispenser;
  memory: MemoryPool;
  snowflake: SnowflakeSource;
  /** This process's obfuscation key fingerprint, stamped on the obfuscated tags it creates. */
  keyFingerprint: string | undefined;
}

/**
 * Every source of a serving process behind one dispenser: in-memory double buffers, Redis pools
 * when the process has them, direct segments, sharded sequences, and the embedded Snowflake and
 * UID generators (every serving process has one, so the fallback costs no network hop).
 */
export async function buildDispenser(
  config: Config,
  deps: {
    db: Database;
    store: BizStore;
    redis: RedisPools | undefined;
    deployment: Deployment;
    changes?: ChangeFeed;
    metrics: DispenserMetrics;
    registry: Registry;
    logger: Logger;
    closers: Closers;
  },
): Promise<DispenserParts> {
  const { db, store, redis, metrics, logger, closers } = deps;
  const { watch, zk, zkWorker } = deps.deployment;
  const memory = new MemoryPool({ allocator: store, logger });
  closers.add('memory pool', () => memory.close());
  const counter = redis && config.IDMINT_LOCAL_BUFFER > 0 ? new LocalBlockBuffer(redis.counter, config.IDMINT_LOCAL_BUFFER) : redis?.counter;
  const pools: PoolSources = { memory, ...(redis && counter ? { 'redis-list': redis.list, 'redis-counter': counter } : {}) };
  const { clockFile } = testHooks();
  const clock = clockFile ? fileClock(clockFile) : undefined;
  const snowflake = await createSnowflakeSourceFromConfig(config, {
    logger,
    db,
    ...(zk ? { zk } : {}),
    ...(zkWorker ? { zkWorker } : {}),
    guard: () => watch.refusal('snowflake'),
    ...(redis ? { redis: redis.connection.patient } : {}),
    ...(clock ? { clock } : {}),
  });
  closers.add('snowflake', () => snowflake.close());
  const segment = segmentSource(store, { logger });
  closers.add('segment rung', () => segment.close());
  // uid-generator's worker node per start, in this region's part of the worker ids when there are several.
  const uidNodes = new PostgresWorkerIdProvider({ db, host: hostname(), port: `${config.IDMINT_PORT}-${process.pid}`, logger });
  const region = regionOf(config);
  const regional = region ? new RegionalWorkerIdProvider(uidNodes, region) : uidNodes;
  const uid = new UidSource({ provider: new GuardedWorkerIdProvider(regional, () => watch.refusal('uid')), logger });
  closers.add('uid', () => uid.close());
  const formats = new TagFormats(config.IDMINT_OBFUSCATION_KEY, () => watch.refusal('obfuscated'));
  const dispenser = new Dispenser({
    store,
    pools,
    defaultPool: redis ? DEFAULT_REDIS_POOL : 'memory',
    segment,
    sharded: new ShardedSource(memory, SHARDED_LAYOUT, config.IDMINT_APP_ID),
    snowflake,
    uid,
    maxCount: config.IDMINT_MAX_COUNT,
    formats,
    maxBlockCount: config.IDMINT_MAX_BLOCK_COUNT,
    maxIdsInFlight: config.IDMINT_MAX_IDS_IN_FLIGHT,
    poolWaitMs: config.IDMINT_POOL_WAIT_MS,
    tagCacheMs: config.IDMINT_TAG_CACHE_MS,
    metrics,
    logger,
  });
  metrics.depthSource = () => memory.depths();
  // A tag changed anywhere is reloaded at its next request (its range narrowed: buffers dropped).
  const unsubscribe = deps.changes?.subscribe({
    change: (c) => c.table === 'idmint_biz' && c.bizTag !== undefined && dispenser.invalidate(c.bizTag),
    reset: () => dispenser.invalidateAll(),
  });
  if (unsubscribe) closers.add('tag changes', async () => unsubscribe());
  keepTagListLoaded(dispenser, logger, closers);
  return { dispenser, memory, snowflake, keyFingerprint: formats.keyFingerprint };
}

/** How often a serving process lists every tag into its tag cache. */
export const TAG_LIST_EVERY_MS = 60_000;

/**
 * Lists every tag at start and once a minute, so that with Postgres down a tag this process has
 * not served yet (created anywhere up to a minute before the outage) still takes its fallback
 * ladder instead of answering NOT_READY. A failed listing is the store's outage, logged there.
 */
function keepTagListLoaded(dispenser: Dispenser, logger: Logger, closers: Closers): void {
  const list = (): void => {
    dispenser.preloadTags().then(
      (added) => added > 0 && logger.debug({ added }, 'tags listed into the tag cache'),
      (err: unknown) => logger.debug({ err: (err as Error).message }, 'listing tags failed; known tags stay cached'),
    );
  };
  list();
  const timer = setInterval(list, TAG_LIST_EVERY_MS);
  timer.unref();
  closers.add('tag list', async () => clearInterval(timer));
}
