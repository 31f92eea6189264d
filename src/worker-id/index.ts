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
export { ZooKeeperWorkerIdProvider, ZOOKEEPER_WORKER_ID_DEFAULTS, type ZooKeeperWorkerIdProviderOptions, type ZooKeeperWorkerIdLease, type ZkEndpoint } from './zookeeper-provider.js';
export { PostgresWorkerIdProvider, POSTGRES_WORKER_ID_DEFAULTS, type PostgresWorkerIdProviderOptions } from './postgres-provider.js';
export { RedisWorkerIdProvider, REDIS_WORKER_ID_DEFAULTS, type RedisWorkerIdProviderOptions } from './redis-provider.js';
export { RegionalWorkerIdProvider } from './regional-provider.js';
