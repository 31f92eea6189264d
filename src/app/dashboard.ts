import { hostname } from 'node:os';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Logger } from '../core/logger.js';
import type { BizStore } from '../core/ports.js';
import type { ReadinessReport } from '../http/server.js';
import type { DispenserMetrics } from '../dispenser/metrics.js';
import { DashboardReporter } from '../dashboard/reporter.js';
import { dashboardRoutes } from '../dashboard/routes.js';
import { MemoryDashboardStore, RedisDashboardStore, type DashboardStore, type PoolPoint } from '../dashboard/store.js';
import type { Config } from './config.js';
import type { RedisPools } from './pools.js';
import { packageVersion } from './version.js';

/** Where this process keeps and finds the dashboard's history. */
export interface DashboardHistory {
  readonly store: DashboardStore;
  readonly kind: 'redis' | 'memory';
}

/** In Redis when the process has it (shared by the deployment), in memory otherwise; bounded either way. */
export function openDashboardHistory(config: Config, redis: RedisPools | undefined): DashboardHistory {
  const limits = { samples: Math.ceil(config.IDMINT_DASHBOARD_HISTORY_MS / config.IDMINT_DASHBOARD_SAMPLE_MS) + 10, refills: 20_000 };
  return redis
    ? { store: new RedisDashboardStore(redis.connection.fast, limits, config.IDMINT_POOL_KEY_PREFIX), kind: 'redis' }
    : { store: new MemoryDashboardStore(limits), kind: 'memory' };
}

/** `host:pid`, the name a process's reports and refill events carry. */
export const PROCESS_ID = `${hostname()}:${process.pid}`;

export interface DashboardReporterParts {
  config: Config;
  history: DashboardHistory;
  roles: readonly string[];
  readiness: () => Promise<ReadinessReport>;
  metrics: DispenserMetrics;
  /** Every pool now (written into samples): only a process that samples needs it. */
  pools?: (() => Promise<PoolPoint[]>) | undefined;
  /** The Kafka pool topics, in a process whose refill role fills them. */
  kafkaPools?: (() => Promise<PoolPoint[]>) | undefined;
  sampler: boolean;
  logger: Logger;
}

const startedAt = Date.now();

/** This process's reports (and samples, for an API process); `runDashboardReporter` starts it. */
export function dashboardReporter(parts: DashboardReporterParts): DashboardReporter {
  return new DashboardReporter({
    store: parts.history.store,
    identity: { id: PROCESS_ID, host: hostname(), pid: process.pid, roles: [...parts.roles], version: packageVersion(), startedAt },
    health: parts.readiness,
    issued: () => parts.metrics.issuedTotals(),
    pools: parts.pools,
    kafkaPools: parts.kafkaPools,
    sampler: parts.sampler,
    sampleMs: parts.config.IDMINT_DASHBOARD_SAMPLE_MS,
    logger: parts.logger,
  });
}

/** Starts the reporter; it stops when `app` closes. */
export function runDashboardReporter(app: FastifyInstance, reporter: DashboardReporter): void {
  reporter.start();
  app.addHook('onClose', async () => reporter.close());
}

/** The page at /dashboard, in the shape `buildHttpServer({ extensions })` takes. */
export function dashboardPage(options: { config: Config; history: DashboardHistory; reporter: DashboardReporter; store: BizStore; bullBoard: boolean }) {
  const { config, history } = options;
  return async (app: FastifyInstance, authorize: (request: FastifyRequest) => void): Promise<void> => {
    await app.register(async (scope) =>
      dashboardRoutes(scope, {
        store: history.store,
        storeKind: history.kind,
        reporter: options.reporter,
        tags: () => options.store.listBiz(),
        authorize,
        sampleMs: config.IDMINT_DASHBOARD_SAMPLE_MS,
        historyMs: config.IDMINT_DASHBOARD_HISTORY_MS,
        links: { ui: options.bullBoard ? 'ui' : undefined, grafana: config.IDMINT_GRAFANA_URL },
      }),
    );
  };
}
