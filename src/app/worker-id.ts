import { hostname, networkInterfaces } from 'node:os';
import type { Redis } from 'ioredis';
import { ConfigError } from '../core/errors.js';
import { usesRedis } from './connections.js';
import type { ZkCredential } from '../zookeeper/digest.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { systemClock, type Clock, type WorkerIdProvider } from '../core/ports.js';
import { createSnowflakeSource, type SnowflakeSource, type SnowflakeSourceOptions } from '../dispenser/sources/snowflake.js';
import type { SqlClient } from '../store/db.js';
import { FileWorkerIdProvider } from '../worker-id/file-provider.js';
import { PostgresLeaseWorkerIdProvider } from '../worker-id/postgres-lease-provider.js';
import { RedisWorkerIdProvider } from '../worker-id/redis-provider.js';
import { StaticWorkerIdProvider } from '../worker-id/static-provider.js';
import { RegionalWorkerIdProvider } from '../worker-id/regional-provider.js';
import { GuardedWorkerIdProvider } from '../worker-id/guarded-provider.js';
import { regionOf, type Config } from './config.js';

export type WorkerIdConfig = Pick<
  Config,
  | 'ZK_CONNECT'
  | 'IDMINT_WORKER_ID'
  | 'IDMINT_WORKER_ID_PROVIDER'
  | 'IDMINT_WORKER_ID_ORDINAL'
  | 'IDMINT_WORKER_ID_LEASE_MS'
  | 'IDMINT_WORKER_ID_WAIT_MS'
  | 'IDMINT_PROCESSES'
  | 'IDMINT_PROCESS_INDEX'
  | 'IDMINT_DATA_DIR'
  | 'IDMINT_ADVERTISE'
  | 'IDMINT_HOST'
  | 'IDMINT_PORT'
  | 'DATABASE_URL'
  | 'REDIS_URL'
  | 'REDIS_SENTINELS'
  | 'REDIS_CLUSTER_NODES'
  | 'IDMINT_POOL_KEY_PREFIX'
  | 'IDMINT_ZK_AUTH'
  | 'IDMINT_REGIONS'
  | 'IDMINT_REGION'
  | 'IDMINT_REGION_STRIPE'
>;

export interface WorkerIdDeps {
  logger?: Logger;
  clock?: Clock;
  /** The process's database, for the Postgres provider. */
  db?: SqlClient;
  /** The process's Redis client, for the Redis provider. */
  redis?: Redis;
  /** The deployment's ZooKeeper credential (src/app/deployment.ts); default IDMINT_ZK_AUTH. */
  zk?: ZkCredential;
  /** Where the deployment's ZooKeeper worker ids live (as recorded); default Leaf's `/idmint/snowflake`. */
  zkWorker?: { root: string; leafRoot?: string } | undefined;
}

/**
 * Picks the provider the config names. IDMINT_WORKER_ID → static (it skips every server).
 * IDMINT_WORKER_ID_PROVIDER names one (zookeeper, postgres, redis, file); `auto` (the default)
 * takes ZooKeeper when ZK_CONNECT is set; else, with a shared Postgres, Postgres (several
 * processes may share that database, and a file on each machine would give them all the same id);
 * else (embedded, one process per data dir) the file. ZooKeeper, Postgres and Redis lease their
 * ids and reclaim them once a lease is gone (leased-provider.ts), preferring IDMINT_WORKER_ID_ORDINAL
 * when set. The lease file and clock mark live in IDMINT_DATA_DIR. In one region of several
 * (IDMINT_REGIONS), that provider numbers the workers inside the region's part of the ids.
 */
export async function workerIdProviderFromConfig(config: WorkerIdConfig, deps: WorkerIdDeps = {}): Promise<WorkerIdProvider> {
  const inner = await localProvider(config, deps);
  const region = regionOf(config);
  return region ? new RegionalWorkerIdProvider(inner, region) : inner;
}

/** Leaf's root, where deployments of earlier versions keep their ZooKeeper worker ids (and a deployment whose record says so); newer ones have their own (src/app/deployment.ts). */
export const ZK_WORKER_ROOT = '/idmint/snowflake';

type ProviderKind = 'zookeeper' | 'postgres' | 'redis' | 'file';

function providerKind(config: WorkerIdConfig, database: boolean): ProviderKind {
  const wanted = config.IDMINT_WORKER_ID_PROVIDER;
  return wanted !== 'auto' ? wanted : config.ZK_CONNECT !== undefined ? 'zookeeper' : config.DATABASE_URL !== undefined && database ? 'postgres' : 'file';
}

/**
 * The registry this process would number its Snowflake worker from, as the deployment record
 * holds it (`zookeeper /idmint/snowflake`, `postgres`, `redis <prefix>`, `file`, `static`): two
 * registries number workers independently, so every process of a deployment must use one.
 */
export function workerIdRegistryOf(config: WorkerIdConfig, { database }: { database: boolean }): string {
  if (config.IDMINT_WORKER_ID !== undefined) return 'static';
  const kind = providerKind(config, database);
  if (kind === 'zookeeper') return `zookeeper ${ZK_WORKER_ROOT}`;
  if (kind === 'redis') return `redis ${config.IDMINT_POOL_KEY_PREFIX}idmint:`;
  return kind;
}

/** The provider inside the region (or the only one): it numbers this region's workers. */
async function localProvider(config: WorkerIdConfig, deps: WorkerIdDeps): Promise<WorkerIdProvider> {
  const logger = deps.logger ?? silentLogger;
  const clock = deps.clock ?? systemClock;
  const dataDir = config.IDMINT_DATA_DIR;
  const preferredWorkerId = preferredId(config);
  if (config.IDMINT_WORKER_ID !== undefined) {
    if (preferredWorkerId !== undefined) throw new ConfigError('IDMINT_WORKER_ID and IDMINT_WORKER_ID_ORDINAL both name the worker id; set one');
    return new StaticWorkerIdProvider(config.IDMINT_WORKER_ID, { dataDir, logger, clock });
  }
  const kind = providerKind(config, deps.db !== undefined);
  const missing = (what: string) => new ConfigError(`IDMINT_WORKER_ID_PROVIDER=${kind} needs ${what}`);
  const leased = {
    dataDir,
    logger,
    clock,
    preferredWaitMs: config.IDMINT_WORKER_ID_WAIT_MS,
    // A registry that is new, or may have lost writes, is guarded for two leases: a start waits it
    // out (logging why) rather than exit, so a deployment's first start on the Redis provider serves.
    maxGuardWaitMs: 2 * config.IDMINT_WORKER_ID_LEASE_MS + 5000,
    ...(preferredWorkerId === undefined ? {} : { preferredWorkerId }),
  };
  switch (kind) {
    case 'zookeeper': {
      if (config.ZK_CONNECT === undefined) throw missing('ZK_CONNECT');
      // The ZooKeeper client is loaded only by processes that register there.
      const { ZooKeeperWorkerIdProvider } = await import('../worker-id/zookeeper-provider.js');
      const zk = deps.zk ?? (config.IDMINT_ZK_AUTH ? { auth: config.IDMINT_ZK_AUTH, generated: false } : undefined);
      return new ZooKeeperWorkerIdProvider({
        connect: config.ZK_CONNECT,
        root: deps.zkWorker?.root ?? ZK_WORKER_ROOT,
        ...(deps.zkWorker ? { leafRoot: deps.zkWorker.leafRoot ?? '' } : {}),
        address: stableAddress(config),
        sessionTimeoutMs: config.IDMINT_WORKER_ID_LEASE_MS,
        ...leased,
        ...(zk ? { auth: zk.auth, authGenerated: zk.generated } : {}),
      });
    }
    case 'postgres':
      if (config.DATABASE_URL === undefined || !deps.db) throw missing('DATABASE_URL');
      return new PostgresLeaseWorkerIdProvider({ db: deps.db, identity: advertisedAddress(config), leaseMs: config.IDMINT_WORKER_ID_LEASE_MS, ...leased });
    case 'redis':
      if (!usesRedis(config) || !deps.redis) throw missing('REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES');
      return new RedisWorkerIdProvider({
        redis: deps.redis,
        app: 'idmint',
        address: stableAddress(config),
        keyPrefix: `${config.IDMINT_POOL_KEY_PREFIX}idmint:`,
        leaseMs: config.IDMINT_WORKER_ID_LEASE_MS,
        ...leased,
      });
    case 'file':
      if (preferredWorkerId !== undefined)
        throw new ConfigError(
          'IDMINT_WORKER_ID_ORDINAL needs a registry that leases ids (IDMINT_WORKER_ID_PROVIDER=zookeeper, postgres or redis); the file provider keeps one id per data directory',
        );
      return new FileWorkerIdProvider({ dataDir, logger, clock });
  }
}

/**
 * The id IDMINT_WORKER_ID_ORDINAL names: the number itself, or the one ending the host name (a
 * StatefulSet pod is `<name>-<ordinal>`); process i of IDMINT_PROCESSES = n prefers ordinal × n + i.
 */
export function preferredId(
  config: Pick<Config, 'IDMINT_WORKER_ID_ORDINAL' | 'IDMINT_PROCESSES' | 'IDMINT_PROCESS_INDEX'>,
  host: string = hostname(),
): number | undefined {
  const ordinal = config.IDMINT_WORKER_ID_ORDINAL;
  if (ordinal === undefined) return undefined;
  let n: number;
  if (ordinal === 'hostname') {
    const m = /-(\d{1,7})$/.exec(host);
    if (!m) throw new ConfigError(`IDMINT_WORKER_ID_ORDINAL=hostname: the host name "${host}" does not end in -<number> (a StatefulSet pod's name does)`);
    n = Number(m[1]);
  } else n = Number(ordinal);
  return config.IDMINT_PROCESSES > 1 ? n * config.IDMINT_PROCESSES + (config.IDMINT_PROCESS_INDEX ?? 0) : n;
}

/**
 * A Snowflake source whose worker id comes from the provider the config names; with `guard`, it
 * issues nothing while the guard names a reason (the deployment record disagrees).
 */
export async function createSnowflakeSourceFromConfig(
  config: WorkerIdConfig,
  options: Omit<SnowflakeSourceOptions, 'provider'> & WorkerIdDeps & { guard?: () => string | undefined } = {},
): Promise<SnowflakeSource> {
  const { db, redis, zk, zkWorker, guard, ...rest } = options;
  const provider = await workerIdProviderFromConfig(config, {
    ...(rest.logger ? { logger: rest.logger } : {}),
    ...(rest.clock ? { clock: rest.clock } : {}),
    ...(db ? { db } : {}),
    ...(redis ? { redis } : {}),
    ...(zk ? { zk } : {}),
    ...(zkWorker ? { zkWorker } : {}),
  });
  return createSnowflakeSource({ ...rest, provider: guard ? new GuardedWorkerIdProvider(provider, guard) : provider });
}

/** ip:port is the process's identity in ZooKeeper and Redis: a random port would register anew each start. */
function stableAddress(config: WorkerIdConfig): string {
  if (!config.IDMINT_ADVERTISE && config.IDMINT_PORT === 0) {
    throw new ConfigError('IDMINT_PORT=0 gives no stable worker-id identity: set IDMINT_PORT, or IDMINT_ADVERTISE=ip:port');
  }
  return advertisedAddress(config);
}

/**
 * IDMINT_ADVERTISE, else IDMINT_HOST:IDMINT_PORT with a wildcard or loopback host replaced by
 * this machine's first external IPv4: `127.0.0.1:8080` names every machine with the defaults,
 * and two processes sharing a ZooKeeper node would share a worker id.
 */
export function advertisedAddress(config: Pick<Config, 'IDMINT_ADVERTISE' | 'IDMINT_HOST' | 'IDMINT_PORT'>): string {
  if (config.IDMINT_ADVERTISE) return config.IDMINT_ADVERTISE;
  const host = config.IDMINT_HOST;
  const local = host === '0.0.0.0' || host === '::' || host === 'localhost' || host === '::1' || host.startsWith('127.');
  return `${local ? firstExternalIpv4() : host}:${config.IDMINT_PORT}`;
}

function firstExternalIpv4(): string {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return '127.0.0.1';
}
