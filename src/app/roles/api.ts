import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { UID_LAYOUT } from '../../core/layout.js';
import type { Logger } from '../../core/logger.js';
import type { BizStore, ChangeFeed } from '../../core/ports.js';
import { makeDecoder } from '../../core/decode.js';
import type { DispenserMetrics } from '../../dispenser/metrics.js';
import { buildHttpServer, buildOpsServer } from '../../http/server.js';
import { isLoopback } from '../../http/auth.js';
import type { DispenserParts } from '../dispense.js';
import { exportReadiness, readinessOf, type RefillHealth } from '../readiness.js';
import type { PgDatabase } from '../../store/pg.js';
import type { Database } from '../../store/db.js';
import { PostgresTagTokenStore } from '../../store/tag-tokens.js';
import { groupMetrics } from '../cluster/metrics.js';
import { connectionLimits, regionOf, type Config } from '../config.js';
import type { RedisPools } from '../pools.js';
import { packageVersion } from '../version.js';
import { DEFAULT_REDIS_POOL } from '../../core/pool-kind.js';
import { dashboardPage, dashboardReporter, runDashboardReporter, type DashboardHistory } from '../dashboard.js';
import { fromPoolStats } from '../../dashboard/pools.js';
import { statusPage } from '../../dashboard/status-page.js';
import { RememberedTags } from '../../core/remembered-tags.js';
import type { PoolPoint } from '../../dashboard/store.js';
import { regionsReport, regionsRoute } from '../../regions/report.js';
import { KEY_FINGERPRINT_SETTING } from '../formats.js';
import type { Deployment } from '../deployment.js';

export interface ApiRoleOptions {
  config: Config;
  /** With the API role: the whole API. Without: only /healthz, /readyz and /metrics (the process still holds its port). */
  api: boolean;
  db: Database;
  store: BizStore;
  /** The dispenser and its generators; absent in a process that hands out no IDs (the refill role alone). */
  parts: DispenserParts | undefined;
  redis: RedisPools | undefined;
  /** The deployment record this process is held to (its differences reach /readyz). */
  deployment: Deployment;
  /** The segment fence's state, where segments are fenced in ZooKeeper. */
  fence?: (() => { ok: boolean; message?: string }) | undefined;
  /** Changes made anywhere in the deployment (tag tokens are dropped from the gate at once). */
  changes?: ChangeFeed;
  /** Whether the refill role runs here (for /v1/stats and /readyz), and whether the Kafka responder has started (for /readyz). */
  refillState: () => 'running' | 'starting' | 'off';
  responderState: () => 'running' | 'starting' | 'off';
  /** The responder's own check: its group joined and fetching. */
  responderHealth?: (() => { ok: boolean; message?: string }) | undefined;
  /** Whether the refill worker can refill now (its Redis, its last refills). */
  refillHealth?: RefillHealth | undefined;
  registry: Registry;
  metrics: DispenserMetrics;
  /** The process's roles, as its dashboard report names them. */
  roles: readonly string[];
  /** The dashboard's history; the Kafka pool topics when this process's refill role fills them. */
  dashboard: { history: DashboardHistory; kafkaPools?: (() => Promise<PoolPoint[]>) | undefined };
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
    deployment: () => options.deployment.watch.health(),
    signing: () => options.deployment.signer?.health(),
    fence: options.fence,
    refillState: options.refillState,
    refillHealth: options.refillHealth,
    responderState: options.responderState,
    responderHealth: options.responderHealth,
  });
  exportReadiness(options.registry, readiness);
  const metricsSource = config.IDMINT_PROCESS_INDEX !== undefined && process.send ? groupMetrics(options.registry) : options.registry;
  const region = regionOf(config);
  const metricsToken = config.IDMINT_METRICS_TOKEN ? { metricsToken: config.IDMINT_METRICS_TOKEN } : {};
  const reporterParts = {
    config,
    history: options.dashboard.history,
    roles: options.roles,
    readiness,
    metrics: options.metrics,
    kafkaPools: options.dashboard.kafkaPools,
    logger: options.logger,
  };
  if (!options.api || !parts) {
    const ops = await buildOpsServer({
      registry: metricsSource,
      readiness,
      ...metricsToken,
      host: config.IDMINT_HOST,
      limits: connectionLimits(config),
      logger: options.logger,
    });
    // Its health and Kafka pool topics still reach the dashboard, through the shared history.
    runDashboardReporter(ops, dashboardReporter({ ...reporterParts, sampler: false }));
    return ops;
  }
  const { snowflake } = parts;
  // The tags as last read: the pool sampler, the dashboard and /status keep them through a Postgres outage.
  const tags = new RememberedTags(store);
  // The BullMQ dashboard and refill stats only where Redis pools are: nothing else loads them.
  const [bullBoardModule, refillStats] = redis ? await Promise.all([import('../../dashboard/bull-board.js'), import('../../refill/stats.js')]) : [];
  const stats =
    redis && refillStats
      ? () =>
          refillStats.collectRefillStats({
            store: tags,
            sinks: { 'redis-list': redis.list, 'redis-counter': redis.counter },
            meta: redis.statsMeta,
            queue: redis.queue,
            autoKind: DEFAULT_REDIS_POOL,
          })
      : undefined;
  // `/v1/stats` and the /status page: the pools, and whether the refill role runs here.
  const serverStats = stats ? async () => ({ ...(await stats()), refillRole: options.refillState() }) : undefined;
  // The dashboard samples every Redis pool, or without Redis this process's buffers.
  const pools = stats
    ? async () => fromPoolStats((await stats()).pools)
    : async () =>
        (options.metrics.depthSource?.() ?? []).map((d) => ({ bizTag: d.bizTag, shard: d.shard, kind: 'buffer', depth: d.depth, target: null, rate: 0 }));
  const reporter = dashboardReporter({ ...reporterParts, pools, sampler: true, tags });
  const bullBoard = redis !== undefined;
  const app = await buildHttpServer({
    dispenser: parts.dispenser,
    store,
    registry: options.registry,
    ...(metricsSource !== options.registry ? { metricsSource } : {}),
    ...metricsToken,
    decode: makeDecoder({ snowflake: snowflake.layout, uid: UID_LAYOUT, ...(region ? { region } : {}) }),
    decodeSnowflake: (id) => snowflake.decode(id),
    nextSnowflakeId: () => snowflake.nextId(),
    host: config.IDMINT_HOST,
    version: packageVersion(),
    ...(config.IDMINT_ADMIN_TOKEN ? { adminToken: config.IDMINT_ADMIN_TOKEN } : {}),
    ...(config.IDMINT_GATE_PASS ? { gatePass: config.IDMINT_GATE_PASS } : {}),
    readiness,
    limits: connectionLimits(config),
    sliceIds: config.IDMINT_HTTP_SLICE_IDS,
    tokens: new PostgresTagTokenStore(db),
    keyFingerprint: parts.keyFingerprint,
    ...(options.changes ? { changes: options.changes } : {}),
    rateLimits: { perClient: config.IDMINT_RATE_LIMIT_CLIENT, perTag: config.IDMINT_RATE_LIMIT_TAG, windowMs: config.IDMINT_RATE_LIMIT_WINDOW_MS },
    extensions: [
      statusPage({
        store,
        tags,
        depths: () => options.metrics.depthSource?.() ?? [],
        history: () => options.metrics.history.snapshot(),
        ...(serverStats ? { stats: serverStats } : {}),
      }),
      regionsRoute(() => regionsReport(db, KEY_FINGERPRINT_SETTING)),
      dashboardPage({ config, history: options.dashboard.history, reporter, tags, db, bullBoard }),
      // Read-only by default off loopback: the board's buttons retry, clean and remove jobs.
      ...(redis && bullBoardModule ? [bullBoardModule.bullBoardExtension({ queues: [redis.queue.queue], readOnly: uiReadOnly(config) })] : []),
    ],
    ...(redis && serverStats
      ? {
          stats: serverStats,
          onTagChange: (bizTag: string) => primePools(redis, store, bizTag, options.logger),
        }
      : {}),
    logger: options.logger,
  });
  runDashboardReporter(app, reporter);
  return app;
}

/** bull-board's buttons retry, clean and remove jobs: off by default where others can reach it. */
function uiReadOnly(config: Config): boolean {
  return config.IDMINT_UI_READONLY === undefined ? !isLoopback(config.IDMINT_HOST) : config.IDMINT_UI_READONLY === 'true';
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
