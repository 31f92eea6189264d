import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Logger } from '../core/logger.js';
import type { ReadinessReport } from '../http/server.js';
import type { DispenserMetrics } from '../dispenser/metrics.js';
import type { RememberedTags } from '../core/remembered-tags.js';
import { MirroredDashboardStore } from '../dashboard/mirror.js';
import { SILENT_INTERVALS } from '../dashboard/processes.js';
import { DashboardReporter } from '../dashboard/reporter.js';
import { dashboardRoutes } from '../dashboard/routes.js';
import { RedisDashboardStore, type PoolPoint } from '../dashboard/store.js';
import type { Database } from '../store/db.js';
import { PostgresDeploymentRecord } from '../store/deployment-record.js';
import type { Config } from './config.js';
import type { RedisPools } from './pools.js';
import { packageVersion } from './version.js';
import { advertisedAddress } from './worker-id.js';

/** Where this process keeps and finds the dashboard's history. */
export interface DashboardHistory {
  /** The history, mirrored in this process's memory: what the page shows while Redis is down. */
  readonly store: MirroredDashboardStore;
  readonly kind: 'redis' | 'memory';
}

/** In Redis when the process has it (shared by the deployment, mirrored in memory), in memory otherwise; bounded either way. */
export function openDashboardHistory(config: Config, redis: RedisPools | undefined): DashboardHistory {
  const limits = { samples: Math.ceil(config.IDMINT_DASHBOARD_HISTORY_MS / config.IDMINT_DASHBOARD_SAMPLE_MS) + 10, refills: 20_000 };
  const shared = redis ? new RedisDashboardStore(redis.connection.fast, limits, config.IDMINT_POOL_KEY_PREFIX) : undefined;
  return { store: new MirroredDashboardStore({ shared, limits, historyMs: config.IDMINT_DASHBOARD_HISTORY_MS }), kind: redis ? 'redis' : 'memory' };
}

/** `host:pid`, the name a process's reports and refill events carry. */
export const PROCESS_ID = `${hostname()}:${process.pid}`;

/**
 * How the dashboard names this process: the address it advertises (IDMINT_ADVERTISE, else its
 * listen address with a wildcard or loopback host replaced by the machine's address, as its worker
 * id is registered), `#index` added for one of IDMINT_PROCESSES (they share the port).
 */
export function processAddress(
  config: Pick<Config, 'IDMINT_ADVERTISE' | 'IDMINT_HOST' | 'IDMINT_PORT' | 'IDMINT_PROCESS_INDEX'>,
  listenedPort?: number,
): string {
  const port = config.IDMINT_PORT === 0 && listenedPort ? listenedPort : config.IDMINT_PORT;
  const base = advertisedAddress({ ...config, IDMINT_PORT: port });
  return config.IDMINT_PROCESS_INDEX === undefined ? base : `${base}#${config.IDMINT_PROCESS_INDEX}`;
}

/** The server each reporter's process listens on, once runDashboardReporter knows it (IDMINT_PORT=0 picks the port then). */
const servers = new WeakMap<DashboardReporter, { server?: FastifyInstance['server'] }>();

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
  /** The tags as last read (a sampler keeps them fresh for the page during a Postgres outage). */
  tags?: RememberedTags | undefined;
  logger: Logger;
}

const startedAt = Date.now();

/** This process's reports (and samples, for an API process); `runDashboardReporter` starts it. */
export function dashboardReporter(parts: DashboardReporterParts): DashboardReporter {
  const place: { server?: FastifyInstance['server'] } = {};
  const { store } = parts.history;
  const tags = parts.tags;
  const reporter = new DashboardReporter({
    store,
    identity: { id: PROCESS_ID, host: hostname(), pid: process.pid, roles: [...parts.roles], version: packageVersion(), startedAt },
    address: () => processAddress(parts.config, (place.server?.address() as AddressInfo | null)?.port),
    refresh: () => Promise.all([store.sync(), tags?.read()]),
    health: parts.readiness,
    issued: () => parts.metrics.issuedTotals(),
    pools: parts.pools,
    kafkaPools: parts.kafkaPools,
    sampler: parts.sampler,
    sampleMs: parts.config.IDMINT_DASHBOARD_SAMPLE_MS,
    logger: parts.logger,
  });
  servers.set(reporter, place);
  return reporter;
}

/** Starts the reporter; when `app` closes it stops, writing a last report that says this process stopped. */
export function runDashboardReporter(app: FastifyInstance, reporter: DashboardReporter): void {
  const place = servers.get(reporter);
  if (place) place.server = app.server;
  reporter.start();
  app.addHook('onClose', async () => reporter.close());
}

/** The page at /dashboard, in the shape `buildHttpServer({ extensions })` takes. */
export function dashboardPage(options: {
  config: Config;
  history: DashboardHistory;
  reporter: DashboardReporter;
  tags: RememberedTags;
  db: Database;
  bullBoard: boolean;
}) {
  const { config, history } = options;
  // While Redis cannot be read, Postgres still lists the processes that heartbeat (the deployment record).
  const record = new PostgresDeploymentRecord(options.db, PROCESS_ID);
  const liveWithinMs = Math.max(SILENT_INTERVALS * config.IDMINT_DASHBOARD_SAMPLE_MS, 3 * config.IDMINT_DEPLOYMENT_CHECK_MS);
  return async (app: FastifyInstance, authorize: (request: FastifyRequest) => void): Promise<void> => {
    await app.register(async (scope) =>
      dashboardRoutes(scope, {
        store: history.store,
        storeKind: history.kind,
        reporter: options.reporter,
        tags: options.tags,
        live: () => record.live(liveWithinMs),
        authorize,
        sampleMs: config.IDMINT_DASHBOARD_SAMPLE_MS,
        historyMs: config.IDMINT_DASHBOARD_HISTORY_MS,
        links: { ui: options.bullBoard ? 'ui' : undefined, grafana: config.IDMINT_GRAFANA_URL },
      }),
    );
  };
}
