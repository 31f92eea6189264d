import type { FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { IdmintError, isIdmintError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { BizStore } from '../core/ports.js';
import type { Dispenser } from '../dispenser/dispenser.js';
import { DispenserMetrics, instrumentStore } from '../dispenser/metrics.js';
import { assertAdminExposureSafe } from '../http/auth.js';
import { PostgresBizStore } from '../store/biz-store.js';
import { Closers } from './closers.js';
import type { Config } from './config.js';
import { lockDataDir } from './data-lock.js';
import { openDatabase } from './database.js';
import { buildDispenser } from './dispense.js';
import { listen } from './listen.js';
import { watchExhaustion } from './exhaustion.js';
import { buildApiServer } from './roles/api.js';
import type { RefillRole } from './roles/refill.js';
import { prepareDataDir } from './data-dir.js';
import { checkCredentials } from './preflight.js';

export type Role = 'api' | 'refill' | 'responder';

export interface Runtime {
  /** The HTTP server: the whole API, or only health and metrics without the `api` role. */
  readonly app: FastifyInstance;
  readonly dispenser: Dispenser;
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
    const dataDir = prepareDataDir(config.IDMINT_DATA_DIR);
    // One process per data dir, whatever the database: the worker-id file and clock mark live here.
    const lock = lockDataDir(dataDir);
    closers.add('data lock', () => lock.release());

    // A wrong password or certificate stops the start here, with one line naming the server.
    await checkCredentials(config, logger);
    const db = await openDatabase(config, logger, closers, dataDir);
    const registry = new Registry();
    const metrics = new DispenserMetrics(registry, { defaultMetrics: true });
    const store = instrumentStore(new PostgresBizStore(db, { logger }), metrics);
    // Redis, BullMQ and KafkaJS are loaded only by processes configured to use them: the embedded
    // default and a Postgres-only api start without them (half a second and ~55 MB less here).
    const pools = config.REDIS_URL ? await import('./pools.js') : undefined;
    const redis = pools?.openRedisPools(config, { logger, registry, closers });
    const { dispenser, snowflake, keyMismatch } = await buildDispenser(config, { db, store, redis, metrics, registry, logger, closers });
    watchExhaustion({ registry, metrics, store, db, warnDays: config.IDMINT_EXHAUSTION_WARN_DAYS, logger });
    if (options.seedDemoTag !== false && !config.DATABASE_URL) await seedDemoTag(store, log);

    // Refills in the background: a refill worker waits for Redis; the API must not.
    let refill: RefillRole | undefined;
    if (roles.has('refill') && redis && pools) {
      const kafkaSink = pools.openKafkaPoolSink(config, { logger, registry, closers });
      const { startRefillRole } = await import('./roles/refill.js');
      const starting = startRefillRole({ config, store, redis, kafkaSink, logger, registry }).then(
        (role) => {
          refill = role;
          log.info({ queue: config.IDMINT_REFILL_QUEUE }, 'refill worker and sweep scheduler running');
          // Fill pools now rather than at the first cron tick, so early requests need no fallback.
          role.processor.sweep().catch((err: unknown) => log.warn({ err }, 'initial sweep failed; the cron sweep will retry'));
          return role;
        },
        (err: unknown) => void log.error({ err }, 'refill role failed to start'),
      );
      closers.add('refill role', async () => void (await (await starting)?.close()));
    }

    let responderState: () => 'running' | 'starting' | 'off' = () => 'off';
    if (roles.has('responder')) {
      const { startResponderInBackground, startResponderRole } = await import('./roles/responder.js');
      if (roles.has('api')) {
        const background = startResponderInBackground({ config, logger, dispenser, registry });
        closers.add('responder', () => background.close());
        responderState = () => (background.running() ? 'running' : 'starting');
      } else {
        // A responder-only process has nothing else to do: failing to start is fatal.
        const responder = await startResponderRole({ config, logger, dispenser, registry });
        closers.add('responder', () => responder.close());
        log.info('responder ready');
        responderState = () => 'running';
      }
    }

    const app = await buildApiServer({
      config,
      opsOnly: !roles.has('api'),
      db,
      store,
      dispenser,
      snowflake,
      redis,
      keyMismatch,
      refillState: () => (refill ? 'running' : roles.has('refill') ? 'starting' : 'off'),
      responderState,
      registry,
      metrics,
      logger,
    });
    closers.add('http', () => app.close());
    const url = await listen(app, config.IDMINT_HOST, config.IDMINT_PORT);
    return { app, dispenser, store, registry, url, roles, close: () => closers.closeAll() };
  } catch (err) {
    await closers.closeAll();
    throw err;
  }
}

/** IDMINT_ROLES, or every role the configured servers allow. A role whose server is not named is refused. */
export function rolesFrom(config: Config): ReadonlySet<Role> {
  if (config.IDMINT_ROLES) {
    const roles = new Set(config.IDMINT_ROLES.split(',') as Role[]);
    if (roles.has('refill') && !config.REDIS_URL) throw new IdmintError('BAD_REQUEST', 'IDMINT_ROLES includes refill, which needs REDIS_URL (refills fill Redis pools)');
    if (roles.has('responder') && !config.KAFKA_BROKERS) throw new IdmintError('BAD_REQUEST', 'IDMINT_ROLES includes responder, which needs KAFKA_BROKERS');
    return roles;
  }
  const roles = new Set<Role>(['api']);
  if (config.REDIS_URL) roles.add('refill');
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
