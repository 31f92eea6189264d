export type { Database, SqlClient } from './db.js';
export { createPgDatabase, PG_DATABASE_DEFAULTS, type PgDatabaseOptions } from './pg.js';
export { createPgliteDatabase, type PgliteDatabaseOptions } from './pglite.js';
export { migrate, MIGRATIONS, type Migration } from './migrations.js';
export { PostgresBizStore, POSTGRES_BIZ_STORE_DEFAULTS, type PostgresBizStoreOptions } from './biz-store.js';
export { PostgresSettings } from './settings.js';
export { WorkerNodeRepository, WORKER_NODE_TYPE, type WorkerNode, type WorkerNodeInput } from './worker-node-repository.js';
export {
  BIZ_DEFAULTS,
  BIZ_MODES,
  FALLBACK_POLICIES,
  MAX_SHARDS,
  MAX_STEP,
  POOL_KINDS,
  validateBizInput,
  validateBizPatch,
  validateBizTag,
  validateStep,
} from './validate.js';
