import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { UID_LAYOUT } from '../../core/layout.js';
import type { Logger } from '../../core/logger.js';
import type { BizStore } from '../../core/ports.js';
import { makeDecoder } from '../../core/decode.js';
import type { Dispenser } from '../../dispenser/dispenser.js';
import type { DispenserMetrics } from '../../dispenser/metrics.js';
import type { SnowflakeSource } from '../../dispenser/sources/snowflake.js';
import { buildHttpServer, type ReadinessReport } from '../../http/server.js';
import type { Database } from '../../store/db.js';
import { PostgresTagTokenStore } from '../../store/tag-tokens.js';
import { groupMetrics } from '../cluster/metrics.js';
import { connectionLimits, type Config } from '../config.js';
import type { RedisPools } from '../pools.js';
import { DEFAULT_REDIS_POOL } from '../../core/pool-kind.js';

export interface ApiRoleOptions {
  config: Config;
  /** Without the API role: only /healthz, /readyz and /metrics (the process still holds its port). */
  opsOnly: boolean;
  db: Database;
  store: BizStore;
  dispenser: Dispenser;
  snowflake: SnowflakeSource;
  redis: RedisPools | undefined;
  /** Why this process refuses obfuscated tags (IDMINT_OBFUSCATION_KEY differs from the deployment's). */
  keyMismatch?: string | undefined;
  /** Whether the refill role runs here (for /v1/stats), and whether the Kafka responder has started (for /readyz). */
  refillState: () => 'running' | 'starting' | 'off';
  responderState: () => 'running' | 'starting' | 'off';
  registry: Registry;
  metrics: DispenserMetrics;
  logger: Logger;
}

/** The API role's HTTP server (not listening): the whole API, or only the ops routes. */
export async function buildApiServer(options: ApiRoleOptions): Promise<FastifyInstance> {
  const { config, db, store, snowflake, redis } = options;
  // The BullMQ dashboard and refill stats only where Redis pools are: nothing else loads them.
  const [dashboard, refillStats] = redis ? await Promise.all([import('../../http/dashboard.js'), import('../../refill/stats.js')]) : [];
  const readiness = async (): Promise<ReadinessReport> => {
    const checks: ReadinessReport['checks'] = {};
    try {
      await db.query('SELECT 1');
      checks.database = { ok: true };
    } catch (err) {
      checks.database = { ok: false, message: (err as Error).message };
    }
    checks.snowflake = { ok: true, message: `worker ${snowflake.workerId} from ${snowflake.lease.provider}` };
    if (redis) checks.redis = redis.connection.check();
    if (options.keyMismatch) {
      checks.formats = { ok: false, message: options.keyMismatch, hint: 'IDMINT_OBFUSCATION_KEY differs from the key recorded for this deployment: obfuscated tags are refused here' };
    }
    const responder = options.responderState();
    if (responder !== 'off') checks.kafka = responder === 'running' ? { ok: true } : { ok: false, message: 'responder not running yet' };
    // Without Redis the API still serves by each tag's fallback: degraded, not down.
    const status = !checks.database.ok ? 'not_ready' : Object.values(checks).every((c) => c.ok) ? 'ready' : 'degraded';
    return { status, checks };
  };
  return buildHttpServer({
    opsOnly: options.opsOnly,
    dispenser: options.dispenser,
    store,
    registry: options.registry,
    ...(config.IDMINT_PROCESS_INDEX !== undefined && process.send ? { metricsSource: groupMetrics(options.registry) } : {}),
    decode: makeDecoder({ snowflake: snowflake.layout, uid: UID_LAYOUT }),
    decodeSnowflake: (id) => snowflake.decode(id),
    nextSnowflakeId: () => snowflake.nextId(),
    host: config.IDMINT_HOST,
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
          extensions: [dashboard.dashboardExtension({ queues: [redis.queue.queue] })],
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
