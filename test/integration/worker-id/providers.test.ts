import { Redis } from 'ioredis';
import { createPgDatabase, createPgliteDatabase, migrate } from '../../../src/store/index.js';
import {
  FileWorkerIdProvider,
  PostgresWorkerIdProvider,
  RedisWorkerIdProvider,
  StaticWorkerIdProvider,
  ZkClient,
  ZooKeeperWorkerIdProvider,
} from '../../../src/worker-id/index.js';
import { workerIdProviderContract } from '../../contracts/worker-id.contract.js';
import { tempDir } from './helpers.js';
import { env } from '../../support/env.js';
import { uniqueName } from '../../support/names.js';

// Small marks keep quick restarts (which wait out the mark) short.
const fast = { markAheadMs: 50, maxStartWaitMs: 1000 };

workerIdProviderContract('zookeeper', 'same id', async () => {
  const root = `/${uniqueName('idmint-test-', '')}`;
  const dataDir = tempDir();
  return {
    provider: (i) => new ZooKeeperWorkerIdProvider({ connect: env('ZK_CONNECT'), address: `10.0.0.${i}:8080`, root, dataDir, ...fast }),
    close: async () => {
      const zk = await ZkClient.connect({ connect: env('ZK_CONNECT') });
      for (const child of await zk.getChildren(`${root}/forever`).catch(() => [])) await zk.remove(`${root}/forever/${child}`);
      await zk.remove(`${root}/forever`).catch(() => undefined);
      await zk.remove(root).catch(() => undefined);
      zk.close();
    },
  };
});

workerIdProviderContract('postgres', 'new id', async () => {
  const db = createPgDatabase({ connectionString: env('DATABASE_URL'), schema: uniqueName('wid_', ''), max: 4 });
  await migrate(db);
  return {
    provider: (i) => new PostgresWorkerIdProvider({ db, host: `10.0.0.${i}`, port: 8080 }),
    close: async () => {
      await db.query(`DROP SCHEMA IF EXISTS ${(await db.query<{ s: string }>('SELECT current_schema() AS s')).rows[0]!.s} CASCADE`);
      await db.close();
    },
  };
});

workerIdProviderContract('postgres (PGlite, the embedded default)', 'new id', async () => {
  const db = await createPgliteDatabase();
  await migrate(db);
  return { provider: (i) => new PostgresWorkerIdProvider({ db, host: `10.0.0.${i}`, port: 8080 }), close: () => db.close() };
});

workerIdProviderContract('redis', 'same id', async () => {
  const redis = new Redis(env('REDIS_URL'), { lazyConnect: false, maxRetriesPerRequest: 1 });
  const keyPrefix = `${uniqueName('idmint-test:', '')}:`;
  const dataDir = tempDir();
  return {
    provider: (i) => new RedisWorkerIdProvider({ redis, app: 'contract', address: `10.0.0.${i}:8080`, keyPrefix, dataDir, ...fast }),
    close: async () => {
      await redis.del(`${keyPrefix}worker-ids`);
      redis.disconnect();
    },
  };
});

workerIdProviderContract('file', 'same id', async () => {
  const dirs = new Map<number, string>();
  const dirOf = (i: number) => dirs.get(i) ?? (dirs.set(i, tempDir()), dirs.get(i)!);
  // A file provider's id is configured per machine; distinct machines are configured distinctly.
  return { provider: (i) => new FileWorkerIdProvider({ dataDir: dirOf(i), workerId: i, ...fast }), close: async () => undefined };
});

workerIdProviderContract('static', 'same id', async () => {
  const dataDir = tempDir();
  return { provider: (i) => new StaticWorkerIdProvider(i, { dataDir: `${dataDir}/${i}`, ...fast }), close: async () => undefined };
});
