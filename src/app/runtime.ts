import type { RefillHealth } from './readiness.js';
import type { FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { ConfigError, isIdmintError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { BizStore } from '../core/ports.js';
import type { Dispenser } from '../dispenser/dispenser.js';
import { DispenserMetrics, instrumentStore } from '../dispenser/metrics.js';
import { assertAdminExposureSafe } from '../http/auth.js';
import { PostgresBizStore } from '../store/biz-store.js';
import { Closers } from './closers.js';
import { regionOf, type Config } from './config.js';
import { usesRedis } from './connections.js';
import { lockDataDir } from './data-lock.js';
import { openDatabase } from './database.js';
import { buildDispenser } from './dispense.js';
import { listen } from './listen.js';
import { watchExhaustion } from './exhaustion.js';
import { buildApiServer } from './roles/api.js';
import { startInBackground } from './background.js';
import { prepareDataDir } from './data-dir.js';
import { checkCredentials } from './preflight.js';
import { openFencedStore } from './fence.js';
import type { PgIdentity } from '../store/pg.js';
import { openDashboardHistory } from './dashboard.js';
import { kafkaPoolPoints } from '../dashboard/pools.js';
import type { PoolPoint } from '../dashboard/store.js';
import { DEFAULT_REDIS_POOL } from '../core/pool-kind.js';
import { openDeployment } from './deployment.js';
import { openChangeFeed } from '../store/change-feed.js';
import { guardAllocation } from '../deployment/guards.js';
import { advertisedAddress } from './worker-id.js';

export type Role = 'api' | 'refill' | 'responder';

export interface Runtime {
  /** The HTTP server: the whole API, or only health and metrics without the `api` role. */
  readonly app: FastifyInstance;
  /** Absent in a process that hands out no IDs (the refill role alone). */
  readonly dispenser: Dispenser | undefined;
  readonly store: BizStore;
  readonly registry: Registry;
  /** Where the HTTP server listens, e.g. `http://127.0.0.1:8080`. */
  readonly url: string;
  readonly roles: ReadonlySet<Role>;
  /** Idempotent; stops serving, then closes roles, pools, generators and the database in that order. */
  close(): Promise<void>;
}

export interface RuntimeOptions {
  config: Config;
  logger: Logger;
  /** Create a `demo` tag when the embedded store has none (its first run; never in a shared Postgres). Default true. */
  seedDemoTag?: boolean;
}

/**
 * One serving process (`idmint serve`): the embedded default (PGlite, in-memory double buffers,
 * file worker id) or, as servers are named, Postgres, Redis pools and the rest, with the roles
 * IDMINT_ROLES asks for. Every part is added to one list of closers as it opens.
 */
export async function startRuntime(options: RuntimeOptions): Promise<Runtime> {
  const { config, logger } = options;
  const log = logger.child({ component: 'runtime' });
  const closers = new Closers(log);
  try {
    // Refuse an open admin API, or a role without its server, before opening anything.
    assertAdminExposureSafe(config.IDMINT_HOST, config.IDMINT_ADMIN_TOKEN);
    const roles = rolesFrom(config);
    // Only a process that hands out IDs needs a worker id, its clock mark and the data dir that
    // holds them (and the embedded database lives there): a refill worker needs neither.
    const serving = roles.has('api') || roles.has('responder');
    const dataDir = serving || !config.DATABASE_URL ? prepareDataDir(config.IDMINT_DATA_DIR) : undefined;
    if (dataDir) {
      // One process per data dir, whatever the database: the worker-id file and clock mark live here.
      const lock = lockDataDir(dataDir);
      closers.add('data lock', () => lock.release());
    }

    // A wrong password or certificate stops the start here, with one line naming the server.
    await checkCredentials(config, logger);
    // A failover seen by the database is handed to the fence, which exists once the store does.
    let onFailover: ((from: PgIdentity, to: PgIdentity) => void) | undefined;
    const db = await openDatabase(config, logger, closers, dataDir, { onFailover: (from, to) => onFailover?.(from, to) });
    const registry = new Registry();
    const metrics = new DispenserMetrics(registry, { defaultMetrics: true });
    // Changes made anywhere in the deployment reach this process's caches in ~100 ms.
    const changes = await openChangeFeed(db, { logger });
    closers.add('change feed', () => changes.close());
    // What uniqueness depends on is the deployment's, not this process's: held to the record.
    // The refill signs the blocks it writes to Kafka pool topics, the responder its replies.
    const signs = config.KAFKA_BROKERS !== undefined && (roles.has('responder') || (roles.has('refill') && usesRedis(config)));
    const deployment = await openDeployment(config, db, {
      serving,
      signs,
      roles: [...roles],
      address: advertisedAddress(config),
      changes,
      registry,
      logger,
      closers,
    });
    let base = new PostgresBizStore(db, { logger });
    let fence: (() => { ok: boolean; message?: string }) | undefined;
    if (deployment.fenceRoot !== undefined) {
      const fenced = await openFencedStore(config, base, { metrics, logger, closers, zk: deployment.zk, root: deployment.fenceRoot });
      base = fenced.store;
      onFailover = fenced.onFailover;
      fence = fenced.fence.health?.bind(fenced.fence);
    }
    const store = instrumentStore(
      guardAllocation(base, () => deployment.watch.refusal('segments')),
      metrics,
    );
    // Redis, BullMQ and KafkaJS are loaded only by processes configured to use them: the embedded
    // default and a Postgres-only api start without them (half a second and ~55 MB less here).
    const pools = usesRedis(config) ? await import('./pools.js') : undefined;
    const redis = pools?.openRedisPools(config, { logger, registry, closers });
    const parts = serving ? await buildDispenser(config, { db, store, redis, deployment, changes, metrics, registry, logger, closers }) : undefined;
    if (parts) watchExhaustion({ registry, metrics, store, warnDays: config.IDMINT_EXHAUSTION_WARN_DAYS, logger, regions: regionOf(config)?.regions ?? 1 });
    if (options.seedDemoTag !== false && !config.DATABASE_URL) await seedDemoTag(store, log);

    // Roles that wait on a server start in the background, retried until they can: the API must not wait.
    const history = openDashboardHistory(config, redis);
    let kafkaPools: (() => Promise<PoolPoint[]>) | undefined;
    let refillState: () => 'running' | 'starting' | 'off' = () => 'off';
    let refillHealth: RefillHealth | undefined;
    if (roles.has('refill') && redis && pools) {
      const kafkaSink = pools.openKafkaPoolSink(config, { logger, registry, closers, signer: () => deployment.signer?.current() });
      if (kafkaSink) kafkaPools = () => kafkaPoolPoints({ store, sink: kafkaSink, meta: redis.statsMeta, autoKind: DEFAULT_REDIS_POOL });
      const { startRefillRole } = await import('./roles/refill.js');
      const refill = startInBackground(
        'the refill worker',
        () => startRefillRole({ config, store, redis, kafkaSink, refillLog: history.store, logger, registry, deployment: deployment.watch }),
        {
          logger: log,
          onStarted: (role) => {
            log.info({ queue: config.IDMINT_REFILL_QUEUE, sweepEveryMs: config.IDMINT_REFILL_EVERY_MS }, 'refill worker ready');
            // Fill pools now rather than at the first cron tick, so early requests need no fallback.
            role.processor.sweep().catch((err: unknown) => log.warn({ err: (err as Error).message }, 'initial sweep failed; the cron sweep will retry'));
          },
        },
      );
      closers.add('refill role', () => refill.close());
      refillState = () => refill.state();
      refillHealth = (isBack) => refill.started?.worker.health(isBack) ?? { ok: false, message: 'the refill worker has not started yet' };
    }

    let responderState: () => 'running' | 'starting' | 'off' = () => 'off';
    let responderHealth: (() => { ok: boolean; message?: string }) | undefined;
    if (roles.has('responder') && parts) {
      const { startResponderRole } = await import('./roles/responder.js');
      const start = () => startResponderRole({ config, logger, dispenser: parts.dispenser, registry, signer: () => deployment.signer?.current() });
      if (roles.has('api')) {
        const responder = startInBackground('the Kafka responder', start, { logger: log, onStarted: () => log.info('responder ready') });
        closers.add('responder', () => responder.close());
        responderState = () => responder.state();
        responderHealth = () => responder.started?.health() ?? { ok: false, message: 'the Kafka responder has not joined its group yet' };
      } else {
        // A responder-only process has nothing else to do: failing to start is fatal.
        const responder = await start();
        closers.add('responder', () => responder.close());
        log.info('responder ready');
        responderState = () => 'running';
        responderHealth = () => responder.health();
      }
    }

    const app = await buildApiServer({
      config,
      db,
      store,
      parts,
      redis,
      deployment,
      fence,
      changes,
      refillState,
      refillHealth,
      responderState,
      responderHealth,
      registry,
      metrics,
      logger,
      api: roles.has('api'),
      roles: [...roles],
      dashboard: { history, kafkaPools },
    });
    closers.add('http', () => app.close());
    const url = await listen(app, config.IDMINT_HOST, config.IDMINT_PORT);
    return { app, dispenser: parts?.dispenser, store, registry, url, roles, close: () => closers.closeAll() };
  } catch (err) {
    await closers.closeAll();
    throw err;
  }
}

/** IDMINT_ROLES, or every role the configured servers allow. A role whose server is not named is refused. */
export function rolesFrom(config: Config): ReadonlySet<Role> {
  if (config.IDMINT_ROLES) {
    const roles = new Set(config.IDMINT_ROLES.split(',') as Role[]);
    if (roles.has('refill') && !usesRedis(config))
      throw new ConfigError('IDMINT_ROLES includes refill, which needs REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES (refills fill Redis pools)');
    if (roles.has('responder') && !config.KAFKA_BROKERS) throw new ConfigError('IDMINT_ROLES includes responder, which needs KAFKA_BROKERS');
    if (roles.size === 1 && roles.has('refill') && !config.DATABASE_URL) {
      throw new ConfigError('a refill-only process needs DATABASE_URL: it allocates segments in the Postgres the API uses');
    }
    return roles;
  }
  const roles = new Set<Role>(['api']);
  if (usesRedis(config)) roles.add('refill');
  if (config.KAFKA_BROKERS) roles.add('responder');
  return roles;
}

async function seedDemoTag(store: BizStore, log: Logger): Promise<void> {
  if ((await store.listBiz()).length > 0) return;
  try {
    await store.createBiz({ bizTag: 'demo', description: 'created on first start; delete it when you have your own tags' });
    log.info('created the demo tag');
  } catch (err) {
    // Another process seeded it first.
    if (!(isIdmintError(err) && err.code === 'BIZ_TAG_EXISTS')) throw err;
  }
}
