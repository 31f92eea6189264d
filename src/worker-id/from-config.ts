import { networkInterfaces } from 'node:os';
import type { Config } from '../config.js';
import { systemClock, type Clock, type WorkerIdProvider } from '../core/types.js';
import { silentLogger, type Logger } from '../log.js';
import { FileWorkerIdProvider } from './file-provider.js';
import { StaticWorkerIdProvider } from './static-provider.js';
import { ZooKeeperWorkerIdProvider } from './zookeeper-provider.js';

export type WorkerIdConfig = Pick<Config, 'ZK_CONNECT' | 'IDMINT_WORKER_ID' | 'IDMINT_DATA_DIR' | 'IDMINT_ADVERTISE' | 'IDMINT_HOST' | 'IDMINT_PORT'>;

/**
 * Picks the provider the environment asks for: IDMINT_WORKER_ID → static (it "skips ZooKeeper
 * and the file", as config.ts documents); else ZK_CONNECT → ZooKeeper; else the local file.
 * The local mark lives in IDMINT_DATA_DIR in every case.
 */
export function workerIdProviderFromConfig(config: WorkerIdConfig, options: { logger?: Logger; clock?: Clock } = {}): WorkerIdProvider {
  const logger = options.logger ?? silentLogger;
  const clock = options.clock ?? systemClock;
  const dataDir = config.IDMINT_DATA_DIR;
  if (config.IDMINT_WORKER_ID !== undefined) return new StaticWorkerIdProvider(config.IDMINT_WORKER_ID, { dataDir, logger, clock });
  if (config.ZK_CONNECT !== undefined) {
    return new ZooKeeperWorkerIdProvider({ connect: config.ZK_CONNECT, address: advertisedAddress(config), dataDir, logger, clock });
  }
  return new FileWorkerIdProvider({ dataDir, logger, clock });
}

/** IDMINT_ADVERTISE, else IDMINT_HOST:IDMINT_PORT; a wildcard host becomes this machine's first external IPv4. */
export function advertisedAddress(config: Pick<Config, 'IDMINT_ADVERTISE' | 'IDMINT_HOST' | 'IDMINT_PORT'>): string {
  if (config.IDMINT_ADVERTISE) return config.IDMINT_ADVERTISE;
  const host = config.IDMINT_HOST === '0.0.0.0' || config.IDMINT_HOST === '::' ? firstExternalIpv4() : config.IDMINT_HOST;
  return `${host}:${config.IDMINT_PORT}`;
}

function firstExternalIpv4(): string {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return '127.0.0.1';
}
