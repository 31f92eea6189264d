import { hostname, networkInterfaces } from 'node:os';
import type { Config } from '../config.js';
import { systemClock, type Clock, type WorkerIdProvider } from '../core/types.js';
import { silentLogger, type Logger } from '../log.js';
import { IdmintError } from '../core/errors.js';
import type { SqlClient } from '../store/db.js';
import { FileWorkerIdProvider } from './file-provider.js';
import { PostgresWorkerIdProvider } from './postgres-provider.js';
import { StaticWorkerIdProvider } from './static-provider.js';
import { ZooKeeperWorkerIdProvider } from './zookeeper-provider.js';

export type WorkerIdConfig = Pick<Config, 'ZK_CONNECT' | 'IDMINT_WORKER_ID' | 'IDMINT_DATA_DIR' | 'IDMINT_ADVERTISE' | 'IDMINT_HOST' | 'IDMINT_PORT' | 'DATABASE_URL'>;

/**
 * Picks the provider the environment asks for: IDMINT_WORKER_ID → static (it "skips ZooKeeper
 * and the file", as config.ts documents); else ZK_CONNECT → ZooKeeper; else, with a shared
 * Postgres (DATABASE_URL) → a fresh worker node per start, as uid-generator does, because
 * several processes may share that database and a file on each machine would give them all
 * the same id; else (embedded, one process per data dir) the local file.
 * The local mark lives in IDMINT_DATA_DIR whenever an id can be reused.
 */
export function workerIdProviderFromConfig(config: WorkerIdConfig, options: { logger?: Logger; clock?: Clock; db?: SqlClient } = {}): WorkerIdProvider {
  const logger = options.logger ?? silentLogger;
  const clock = options.clock ?? systemClock;
  const dataDir = config.IDMINT_DATA_DIR;
  if (config.IDMINT_WORKER_ID !== undefined) return new StaticWorkerIdProvider(config.IDMINT_WORKER_ID, { dataDir, logger, clock });
  if (config.ZK_CONNECT !== undefined) {
    // ip:port is the process's identity in ZooKeeper: a random port would register anew each start.
    if (!config.IDMINT_ADVERTISE && config.IDMINT_PORT === 0) {
      throw new IdmintError('BAD_REQUEST', 'IDMINT_PORT=0 gives no stable ZooKeeper identity: set IDMINT_PORT, or IDMINT_ADVERTISE=ip:port');
    }
    return new ZooKeeperWorkerIdProvider({ connect: config.ZK_CONNECT, address: advertisedAddress(config), dataDir, logger, clock });
  }
  if (config.DATABASE_URL !== undefined && options.db) {
    return new PostgresWorkerIdProvider({ db: options.db, host: hostname(), port: `${config.IDMINT_PORT}-${process.pid}`, logger });
  }
  return new FileWorkerIdProvider({ dataDir, logger, clock });
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
