import { Redis } from 'ioredis';
import { createPgDatabase, createPgliteDatabase, migrate, type Database } from '../../../src/store/index.js';
import {
  FileWorkerIdProvider,
  PostgresLeaseWorkerIdProvider,
  PostgresWorkerIdProvider,
  RedisWorkerIdProvider,
  StaticWorkerIdProvider,
  ZkClient,
  ZooKeeperWorkerIdProvider,
} from '../../../src/worker-id/index.js';
import { reclamationContract, workerIdProviderContract, type ProviderOptions, type ReclaimingHarness } from '../../contracts/worker-id.contract.js';
import { removeRoot, tempDir } from './helpers.js';
import { env } from '../../support/env.js';
import { uniqueName } from '../../support/names.js';

// Small marks keep quick restarts (which wait out the mark) short; short leases keep the reclamation rules quick.
const fast = { markAheadMs: 50, maxStartWaitMs: 1000, retryEveryMs: 100 };
const address = (i: number) => `10.0.${i >> 8}.${i & 255}:8080`;
const hostPort = (url: string) => new URL(url).host;

async function zookeeperHarness(): Promise<ReclaimingHarness> {
  const root = `/${uniqueName('idmint-test-', '')}`;
  const dataDir = tempDir();
  return {
    // ZooKeeper's smallest session is two ticks (tickTime 2000 in scripts/infra.sh).
    leaseMs: 4000,
    renewEveryMs: 500,
    target: env('ZK_CONNECT'),
    provider: (i, o: ProviderOptions = {}) =>
      new ZooKeeperWorkerIdProvider({
        connect: o.via ? `127.0.0.1:${o.via}` : env('ZK_CONNECT'),
        address: address(i),
        root,
        dataDir: o.dataDir ?? dataDir,
        sessionTimeoutMs: 4000,
        reportEveryMs: 500,
        connectTimeoutMs: 2000,
        ...(o.preferredWorkerId === undefined ? {} : { preferredWorkerId: o.preferredWorkerId }),
        ...fast,
      }),
    close: async () => {
      const zk = await ZkClient.connect({ connect: env('ZK_CONNECT') });
      await removeRoot(zk, root);
      zk.close();
    },
  };
}

async function postgresHarness(): Promise<ReclaimingHarness> {
  const schema = uniqueName('wid_', '');
  const db = createPgDatabase({ connectionString: env('DATABASE_URL'), schema, max: 4 });
  await migrate(db);
  const dataDir = tempDir();
  const behind = new Map<number, Database>();
  const dbVia = (port: number) => {
    const url = new URL(env('DATABASE_URL'));
    url.host = `127.0.0.1:${port}`;
    if (!behind.has(port)) behind.set(port, createPgDatabase({ connectionString: url.toString(), schema, max: 2, connectionTimeoutMillis: 1000 }));
    return behind.get(port)!;
  };
  return {
    leaseMs: 2000,
    renewEveryMs: 400,
    target: hostPort(env('DATABASE_URL')),
    provider: (i, o: ProviderOptions = {}) =>
      new PostgresLeaseWorkerIdProvider({
        db: o.via ? dbVia(o.via) : db,
        identity: address(i),
        dataDir: o.dataDir ?? dataDir,
        leaseMs: 2000,
        renewEveryMs: 400,
        stopMarginMs: 500,
        ...(o.preferredWorkerId === undefined ? {} : { preferredWorkerId: o.preferredWorkerId }),
        ...fast,
      }),
    close: async () => {
      await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await Promise.all([db, ...behind.values()].map((d) => d.close()));
    },
  };
}

async function redisHarness(): Promise<ReclaimingHarness> {
  const redis = new Redis(env('REDIS_URL'), { maxRetriesPerRequest: 1 });
  const keyPrefix = `${uniqueName('idmint-test:', '')}:`;
  const dataDir = tempDir();
  const behind = new Map<number, Redis>();
  const redisVia = (port: number) => {
    if (!behind.has(port)) {
      // Commands fail within a reconnect attempt while the proxy is cut, instead of waiting for it.
      const client = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, retryStrategy: () => 100 });
      client.on('error', () => undefined);
      behind.set(port, client);
    }
    return behind.get(port)!;
  };
  return {
    leaseMs: 600,
    renewEveryMs: 120,
    target: hostPort(env('REDIS_URL')),
    provider: (i, o: ProviderOptions = {}) =>
      new RedisWorkerIdProvider({
        redis: o.via ? redisVia(o.via) : redis,
        app: 'contract',
        address: address(i),
        keyPrefix,
        dataDir: o.dataDir ?? dataDir,
        leaseMs: 600,
        renewEveryMs: 120,
        stopMarginMs: 200,
        ...(o.preferredWorkerId === undefined ? {} : { preferredWorkerId: o.preferredWorkerId }),
        ...fast,
      }),
    close: async () => {
      const keys = await redis.keys(`${keyPrefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      for (const client of [redis, ...behind.values()]) client.disconnect();
    },
  };
}

workerIdProviderContract('zookeeper', 'same id', zookeeperHarness);
reclamationContract('zookeeper', zookeeperHarness);

workerIdProviderContract('postgres (leased, the Snowflake default with DATABASE_URL)', 'same id', postgresHarness);
reclamationContract('postgres', postgresHarness);

workerIdProviderContract('redis', 'same id', redisHarness);
reclamationContract('redis', redisHarness);

// uid-generator's disposable worker node per start: kept for `uid` tags (22 worker bits). It does not reclaim.
workerIdProviderContract('postgres (disposable, uid tags)', 'new id', async () => {
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

workerIdProviderContract('postgres (disposable, on PGlite, the embedded default for uid tags)', 'new id', async () => {
  const db = await createPgliteDatabase();
  await migrate(db);
  return { provider: (i) => new PostgresWorkerIdProvider({ db, host: `10.0.0.${i}`, port: 8080 }), close: () => db.close() };
});

// Neither reclaims: a file's id is configured per machine, a static one by the operator.
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
