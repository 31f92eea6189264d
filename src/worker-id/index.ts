export { ZkClient, ZK_CLIENT_DEFAULTS, CreateMode, ZkException, isZkError, type ZkClientOptions } from '../zookeeper/client.js';
export {
  LocalTimeMark,
  LOCAL_TIME_MARK_DEFAULTS,
  localMarkPath,
  readLocalMark,
  writeLocalMarkSync,
  type LocalMarkState,
  type LocalTimeMarkOptions,
} from './local-time-mark.js';
export { SimpleLease, checkWorkerIdRange } from './lease.js';
export { FileWorkerIdProvider, FILE_WORKER_ID_DEFAULTS, type FileWorkerIdProviderOptions } from './file-provider.js';
export { StaticWorkerIdProvider, type StaticWorkerIdProviderOptions } from './static-provider.js';
export {
  ZooKeeperWorkerIdProvider,
  ZOOKEEPER_WORKER_ID_DEFAULTS,
  type ZooKeeperWorkerIdProviderOptions,
  type ZooKeeperWorkerIdLease,
} from './zookeeper-provider.js';
export { ZooKeeperRegistry, LEGACY_REPORT_GRACE_MS, type ZkWorkerRecord, type ZooKeeperRegistryOptions } from './zookeeper-registry.js';
export { PostgresWorkerIdProvider, POSTGRES_WORKER_ID_DEFAULTS, type PostgresWorkerIdProviderOptions } from './postgres-provider.js';
export { PostgresLeaseWorkerIdProvider, POSTGRES_LEASE_WORKER_ID_DEFAULTS, type PostgresLeaseWorkerIdProviderOptions } from './postgres-lease-provider.js';
export { PostgresRegistry, type PostgresRegistryOptions } from './postgres-registry.js';
export { RedisWorkerIdProvider, REDIS_WORKER_ID_DEFAULTS, type RedisWorkerIdProviderOptions } from './redis-provider.js';
export { RedisRegistry, type RedisRegistryOptions } from './redis-registry.js';
export { LeasedWorkerIdProvider, LEASED_WORKER_ID_DEFAULTS, type LeasedWorkerIdOptions } from './leased-provider.js';
export { LeaseHolder, monotonicNow, type LeasedWorkerIdLease, type Monotonic } from './lease-holder.js';
export { leaseFilePath, readLeaseFile, type LeaseFileState } from './lease-file.js';
export type { WorkerIdRegistry, RegistryListing, TakeRequest, TakeOutcome, RenewOutcome } from './registry.js';
export { RegionalWorkerIdProvider } from './regional-provider.js';
