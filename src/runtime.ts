import { mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import type { Config } from './config.js';
import { IdmintError, isIdmintError } from './core/errors.js';
import { SHARDED_LAYOUT } from './core/sharded.js';
import type { BizStore } from './core/types.js';
import { UID_LAYOUT } from './core/layout.js';
import { lockDataDir } from './data-lock.js';
import { makeDecoder } from './decode.js';
import { Dispenser, type PoolSources } from './dispenser.js';
import { buildHttpServer, type ReadinessReport } from './http/server.js';
import { assertAdminExposureSafe } from './http/auth.js';
import type { Logger } from './log.js';
import { DispenserMetrics, instrumentStore } from './metrics.js';
import { MemoryPool } from './pool/memory.js';
import { DirectSegmentSource } from './segment-source.js';
import { ShardedSource } from './sharded-source.js';
import { createSnowflakeSourceFromConfig } from './snowflake-source.js';
import { UidSource } from './uid-source.js';
import { PostgresWorkerIdProvider } from './worker-id/postgres-provider.js';
import { startRedisPools } from './runtime-redis.js';
import { kafkaPoolSinkFromConfig } from './pool/kafka-sink.js';
import { startResponderRole, type ResponderRole } from './rpc/role.js';
import type { Database } from './store/db.js';
import { migrate } from './store/migrations.js';
import { createPgDatabase } from './store/pg.js';
import { createPgliteDatabase } from './store/pglite.js';
import { PostgresBizStore } from './store/biz-store.js';

export interface Runtime {
  /** The HTTP server: the whole API, or only health and metrics without the `api` role. */
  readonly app: FastifyInstance;
  readonly dispenser: Dispenser;
  readonly store: BizStore;
  readonly registry: Registry;
  /** Where the HTTP server listens, e.g. `http://127.0.0.1:8080`. */
  readonly url: string;
  readonly roles: ReadonlySet<Role>;
  /** Idempotent; stops serving, then closes pools, generators and the database in that order. */
  close(): Promise<void>;
}

export interface RuntimeOptions {
  config: Config;
  logger: Logger;
  /** Create a `demo` tag when the store has none (the embedded first run). Default true. */
  seedDemoTag?: boolean;
}

type Closer = { name: string; close: () => Promise<void> | void };

/**
 * Wires one serving process from the config: the embedded default (PGlite, in-memory double
 * buffers, file worker id) or, as servers are named, Postgres, Redis pools and the rest.
 */
export async function startRuntime(options: RuntimeOptions): Promise<Runtime> {
  const { config, logger } = options;
  const log = logger.child({ component: 'runtime' });
  // Closed in reverse order of opening; a failed start closes what it opened.
  const closers: Closer[] = [];
  const closeAll = async (): Promise<void> => {
    for (const closer of closers.splice(0).reverse()) {
      try {
        await closer.close();
      } catch (err) {
        log.error({ err, part: closer.name }, 'close failed');
      }
    }
  };

  try {
    // Refuse an open admin API, or a role without its server, before opening anything.
    assertAdminExposureSafe(config.IDMINT_HOST, config.IDMINT_ADMIN_TOKEN);
    const roles = rolesFrom(config);
    const dataDir = resolve(config.IDMINT_DATA_DIR);
    mkdirSync(dataDir, { recursive: true });
    // One process per data dir, whatever the database: the worker-id file and clock mark live here.
    const lock = lockDataDir(dataDir);
    closers.push({ name: 'data lock', close: () => lock.release() });

    const db = await openDatabase(config, dataDir, logger, closers);
    await migrate(db, logger);

    const registry = new Registry();
    const metrics = new DispenserMetrics(registry, { defaultMetrics: true });
    const store = instrumentStore(new PostgresBizStore(db, { logger }), metrics);

    const memory = new MemoryPool({ allocator: store, logger });
    closers.push({ name: 'memory pool', close: () => memory.close() });
    const pools: PoolSources = { memory };
    // Kafka pool topics are filled by the same refills as Redis pools.
    const kafkaSink = kafkaPoolSinkFromConfig(config, { logger, registry });
    if (kafkaSink) closers.push({ name: 'kafka pool sink', close: () => kafkaSink.close() });
    const redis = config.REDIS_URL
      ? await startRedisPools({ config, roles, store, registry, logger, closers, ...(kafkaSink ? { extraSinks: { kafka: kafkaSink } } : {}) })
      : undefined;
    if (redis) Object.assign(pools, redis.pools);
    const segment = new DirectSegmentSource(store);
    const sharded = new ShardedSource(memory, SHARDED_LAYOUT, config.IDMINT_APP_ID);
    // Every serving process embeds a Snowflake generator, so the fallback costs no network hop.
    const snowflake = await createSnowflakeSourceFromConfig(config, { logger, db });
    closers.push({ name: 'snowflake', close: () => snowflake.close() });
    const uid = new UidSource({ provider: new PostgresWorkerIdProvider({ db, host: hostname(), port: `${config.IDMINT_PORT}-${process.pid}`, logger }), logger });
    closers.push({ name: 'uid', close: () => uid.close() });

    const dispenser = new Dispenser({
      store,
      pools,
      defaultPool: redis ? 'redis-list' : 'memory',
      segment,
      sharded,
      snowflake,
      uid,
      maxCount: config.IDMINT_MAX_COUNT,
      metrics,
      logger,
    });
    metrics.depthSource = () => memory.depths();

    if (options.seedDemoTag !== false) await seedDemoTag(store, log);

    let responder: ResponderRole | undefined;
    if (roles.has('responder') && config.KAFKA_BROKERS) {
      const starting = startResponderRole({ config, logger, dispenser, registry });
      if (!roles.has('api')) {
        // A responder-only process has nothing else to do: failing to start is fatal.
        responder = await starting;
        log.info('responder ready');
        closers.push({ name: 'responder', close: () => responder?.close() ?? Promise.resolve() });
      } else {
        // Beside the API, in the background: joining a consumer group takes seconds, and HTTP must
        // not wait. A failed start (Kafka down, topic missing) is retried until the process stops.
        let stopped = false;
        const background = (async (): Promise<ResponderRole | undefined> => {
          for (let attempt = starting; ; attempt = startResponderRole({ config, logger, dispenser, registry })) {
            try {
              responder = await attempt;
              if (stopped) {
                await responder.close();
                return undefined;
              }
              log.info('responder ready');
              return responder;
            } catch (err) {
              log.error({ err }, 'Kafka responder failed to start; retrying in 5 s (run `idmint kafka init` if topics are missing)');
              await new Promise((r) => setTimeout(r, 5000).unref());
              if (stopped) return undefined;
            }
          }
        })();
        closers.push({
          name: 'responder',
          close: async () => {
            stopped = true;
            // Not awaited while it may be sleeping between attempts: close what has started.
            await responder?.close();
          },
        });
        void background;
      }
    }

    const readiness = async (): Promise<ReadinessReport> => {
      const checks: ReadinessReport['checks'] = {};
      try {
        await db.query('SELECT 1');
        checks.database = { ok: true };
      } catch (err) {
        checks.database = { ok: false, message: (err as Error).message };
      }
      checks.snowflake = { ok: true, message: `worker ${snowflake.workerId} from ${snowflake.lease.provider}` };
      if (redis) checks.redis = redis.check();
      if (roles.has('responder') && config.KAFKA_BROKERS) checks.kafka = responder ? { ok: true } : { ok: false, message: 'responder not running yet' };
      // Without Redis the API still serves by each tag's fallback: degraded, not down.
      const status = !checks.database.ok ? 'not_ready' : Object.values(checks).every((c) => c.ok) ? 'ready' : 'degraded';
      return { status, checks };
    };

    const app = await buildHttpServer({
      opsOnly: !roles.has('api'),
      dispenser,
      store,
      registry,
      decode: makeDecoder({ snowflake: snowflake.layout, uid: UID_LAYOUT }),
      nextSnowflakeId: () => snowflake.nextId(),
      host: config.IDMINT_HOST,
      ...(config.IDMINT_ADMIN_TOKEN ? { adminToken: config.IDMINT_ADMIN_TOKEN } : {}),
      ...(config.IDMINT_GATE_PASS ? { gatePass: config.IDMINT_GATE_PASS } : {}),
      readiness,
      ...(redis ? { stats: redis.stats, extensions: redis.extensions, onTagChange: redis.prime } : {}),
      logger,
    });
    closers.push({ name: 'http', close: () => app.close() });
    const url = (await listen(app, config.IDMINT_HOST, config.IDMINT_PORT)).replace('[::1]', 'localhost');

    let closing: Promise<void> | undefined;
    return {
      app,
      dispenser,
      store,
      registry,
      url,
      roles,
      close: () => (closing ??= closeAll()),
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}

export type Role = 'api' | 'refill' | 'responder';

async function listen(app: FastifyInstance, host: string, port: number): Promise<string> {
  try {
    return await app.listen({ host, port });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new IdmintError('NOT_READY', `port ${port} on ${host} is in use; stop the other process or set IDMINT_PORT`, { cause: err });
    if (code === 'EACCES') throw new IdmintError('NOT_READY', `no permission to listen on ${host}:${port}; pick a port above 1024 with IDMINT_PORT`, { cause: err });
    if (code === 'EADDRNOTAVAIL') throw new IdmintError('NOT_READY', `${host} is not an address of this machine; fix IDMINT_HOST`, { cause: err });
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

async function openDatabase(config: Config, dataDir: string, logger: Logger, closers: Closer[]): Promise<Database> {
  if (config.DATABASE_URL) {
    const db = createPgDatabase({ connectionString: config.DATABASE_URL, schema: config.IDMINT_PG_SCHEMA, logger });
    closers.push({ name: 'postgres', close: () => db.close() });
    return db;
  }
  const db = await createPgliteDatabase({ dataDir: join(dataDir, 'pglite'), logger });
  closers.push({ name: 'pglite', close: () => db.close() });
  return db;
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

