import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { UID_LAYOUT } from '../../core/layout.js';
import type { Logger } from '../../core/logger.js';
import type { BizStore } from '../../core/ports.js';
import { makeDecoder } from '../../core/decode.js';
import type { DispenserMetrics } from '../../dispenser/metrics.js';
import { buildHttpServer, buildOpsServer } from '../../http/server.js';
import { isLoopback } from '../../http/auth.js';
import type { DispenserParts } from '../dispense.js';
import { exportReadiness, readinessOf } from '../readiness.js';
import type { PgDatabase } from '../../store/pg.js';
import type { Database } from '../../store/db.js';
import { PostgresTagTokenStore } from '../../store/tag-tokens.js';
import { groupMetrics } from '../cluster/metrics.js';
import { connectionLimits, type Config } from '../config.js';
import type { RedisPools } from '../pools.js';
import { packageVersion } from '../version.js';
import { DEFAULT_REDIS_POOL } from '../../core/pool-kind.js';

export interface ApiRoleOptions {
  config: Config;
  /** With the API role: the whole API. Without: only /healthz, /readyz and /metrics (the process still holds its port). */
  api: boolean;
  db: Database;
  store: BizStore;
  /** The dispenser and its generators; absent in a process that hands out no IDs (the refill role alone). */
  parts: DispenserParts | undefined;
  redis: RedisPools | undefined;
  /** Whether the refill role runs here (for /v1/stats and /readyz), and whether the Kafka responder has started (for /readyz). */
  refillState: () => 'running' | 'starting' | 'off';
  responderState: () => 'running' | 'starting' | 'off';
  registry: Registry;
  metrics: DispenserMetrics;
  logger: Logger;
}

/** The process's HTTP server (not listening): the whole API, or only the ops routes. */
export async function buildApiServer(options: ApiRoleOptions): Promise<FastifyInstance> {
  const { config, db, store, parts, redis } = options;
  const readiness = readinessOf({
    db,
    dbServer: 'server' in db ? (db as PgDatabase).server : undefined,
    redis,
    snowflake: parts?.snowflake,
    keyMismatch: parts?.keyMismatch,
    refillState: options.refillState,
    responderState: options.responderState,
  });
  exportReadiness(options.registry, readiness);
  const metricsSource = config.IDMINT_PROCESS_INDEX !== undefined && process.send ? groupMetrics(options.registry) : options.registry;
  if (!options.api || !parts) {
    return buildOpsServer({ registry: metricsSource, readiness, host: config.IDMINT_HOST, limits: connectionLimits(config), logger: options.logger });
  }
  const { snowflake } = parts;
  // The BullMQ dashboard and refill stats only where Redis pools are: nothing else loads them.
  const [dashboard, refillStats] = redis ? await Promise.all([import('../../http/dashboard.js'), import('../../refill/stats.js')]) : [];
  return buildHttpServer({
    dispenser: parts.dispenser,
    store,
    registry: options.registry,
    ...(metricsSource !== options.registry ? { metricsSource } : {}),
    decode: makeDecoder({ snowflake: snowflake.layout, uid: UID_LAYOUT }),
    decodeSnowflake: (id) => snowflake.decode(id),
    nextSnowflakeId: () => snowflake.nextId(),
    host: config.IDMINT_HOST,
    version: packageVersion(),
    ...(config.IDMINT_ADMIN_TOKEN ? { adminToken: config.IDMINT_ADMIN_TOKEN } : {}),
    ...(config.IDMINT_GATE_PASS ? { gatePass: config.IDMINT_GATE_PASS } : {}),
    readiness,
    limits: connectionLimits(config),
    tokens: new PostgresTagTokenStore(db),
    rateLimits: { perClient: config.IDMINT_RATE_LIMIT_CLIENT, perTag: config.IDMINT_RATE_LIMIT_TAG, windowMs: config.IDMINT_RATE_LIMIT_WINDOW_MS },
    status: { depths: () => options.metrics.depthSource?.() ?? [], history: () => options.metrics.history.snapshot() },
    ...(redis && dashboard && refillStats
      ? {
          stats: async () => ({
            ...(await refillStats.collectRefillStats({ store, sinks: { 'redis-list': redis.list, 'redis-counter': redis.counter }, meta: redis.statsMeta, queue: redis.queue, autoKind: DEFAULT_REDIS_POOL })),
            refillRole: options.refillState(),
          }),
          // Read-only by default off loopback: the board's buttons retry, clean and remove jobs.
          extensions: [dashboard.dashboardExtension({ queues: [redis.queue.queue], readOnly: config.IDMINT_UI_READONLY === undefined ? !isLoopback(config.IDMINT_HOST) : config.IDMINT_UI_READONLY === 'true' })],
          onTagChange: (bizTag: string) => primePools(redis, store, bizTag, options.logger),
        }
      : {}),
    logger: options.logger,
  });
}

/** Asks for a refill of a created or changed tag's pools, so its first requests find IDs. */
function primePools(redis: RedisPools, store: BizStore, bizTag: string, logger: Logger): void {
  void store.getBiz(bizTag).then(
    async (tag) => {
      if (!tag || tag.mode !== 'segment') return;
      for (let shard = 0; shard < tag.shards; shard++) await redis.queue.requestRefill(bizTag, shard, 'manual');
    },
    (err: unknown) => logger.warn({ err, bizTag }, 'could not prime the pool of a changed tag'),
  );
}
