import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { LEAF_LAYOUT } from '../../src/core/layout.js';
import type { WorkerIdProvider } from '../../src/core/ports.js';
import { createSnowflakeSource, type SnowflakeSource } from '../../src/dispenser/sources/snowflake.js';
import { createPgDatabase, migrate } from '../../src/store/index.js';
import {
  LeasedWorkerIdProvider,
  PostgresLeaseWorkerIdProvider,
  PostgresRegistry,
  RedisRegistry,
  RedisWorkerIdProvider,
  ZkClient,
  ZooKeeperRegistry,
  ZooKeeperWorkerIdProvider,
  type LeasedWorkerIdLease,
  type WorkerIdRegistry,
} from '../../src/worker-id/index.js';
import { silentLogger } from '../../src/core/logger.js';
import { systemClock } from '../../src/core/ports.js';
import { env } from '../support/env.js';
import { uniqueName } from '../support/names.js';
import { expectNoDuplicates } from '../support/unique.js';
import { removeRoot, tempDir } from '../integration/worker-id/helpers.js';

/**
 * Worker ids reclaimed at the scale of months of a Deployment's restarts, in-process against the
 * real servers through the provider classes: 5,000 starts (IDMINT_RECLAIM_STARTS), each with a
 * new address, on Leaf's 10-bit space (1,024 ids), four at a time, every 10th "killed" (it stops
 * reaching the registry and issues nothing more, leaving its lease to expire; ZooKeeper's ends
 * at once with the session, its mark still ahead). Every start must be served, no id held by two
 * live holders at once, every start's floor at or above every timestamp issued under its id
 * before, and the 20 Snowflake IDs each start issues all distinct.
 */
const STARTS = Number(process.env.IDMINT_RECLAIM_STARTS ?? 5000);
const LANES = 4;
const KILL_EVERY = 10;
const fast = { markAheadMs: 50, maxStartWaitMs: 1000, retryEveryMs: 100 };

interface Registries {
  name: string;
  /** A provider for start `i`; `killable` wraps its registry so the test can kill it. */
  provider(i: number, killable?: (r: WorkerIdRegistry) => WorkerIdRegistry): WorkerIdProvider;
  close(): Promise<void>;
}

type Killable = WorkerIdRegistry & { kill(): void };

/** A registry that, once killed, reaches nothing: every call rejects, as after a SIGKILL. ZooKeeper's session is closed, so its lease goes at once. */
function killable(inner: WorkerIdRegistry): Killable {
  let dead = false;
  const gone = () => Promise.reject(new Error('killed'));
  return {
    kind: inner.kind,
    get where() {
      return inner.where;
    },
    leaseMs: () => inner.leaseMs(),
    open: (m) => (dead ? gone() : inner.open(m)),
    list: (m) => (dead ? gone() : inner.list(m)),
    take: (r) => (dead ? gone() : inner.take(r)),
    renew: (id, t, m) => (dead ? gone() : inner.renew(id, t, m)),
    release: (id, t, f) => (dead ? gone() : inner.release(id, t, f)),
    onLeaseLost: (l) => inner.onLeaseLost?.(l),
    close: () => inner.close(),
    kill() {
      dead = true;
      if (inner instanceof ZooKeeperRegistry) inner.client?.close();
    },
  };
}

const address = (i: number) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}:8080`;

async function zookeeper(): Promise<Registries> {
  const root = `/${uniqueName('idmint-reclaim-', '')}`;
  const dataDir = tempDir();
  const o = (i: number) => ({ connect: env('ZK_CONNECT'), address: address(i), root, dataDir, sessionTimeoutMs: 4000, reportEveryMs: 1000, ...fast });
  return {
    name: 'zookeeper',
    provider: (i, wrap) => {
      if (!wrap) return new ZooKeeperWorkerIdProvider(o(i));
      const { connect, root: r, sessionTimeoutMs } = o(i);
      return new LeasedWorkerIdProvider(
        () =>
          wrap(
            new ZooKeeperRegistry({
              connect,
              root: r,
              address: address(i),
              connectTimeoutMs: 5000,
              sessionTimeoutMs,
              clock: systemClock,
              logger: silentLogger,
            }),
          ),
        `zk-${address(i)}`,
        { identity: address(i), dataDir, renewEveryMs: 1000, ...fast },
      );
    },
    close: async () => {
      const zk = await ZkClient.connect({ connect: env('ZK_CONNECT') });
      await removeRoot(zk, root);
      zk.close();
    },
  };
}

async function postgres(): Promise<Registries> {
  const schema = uniqueName('reclaim_', '');
  const db = createPgDatabase({ connectionString: env('DATABASE_URL'), schema, max: 8 });
  await migrate(db);
  const dataDir = tempDir();
  const o = (i: number) => ({ db, identity: address(i), dataDir, leaseMs: 2000, renewEveryMs: 500, stopMarginMs: 500, ...fast });
  return {
    name: 'postgres',
    provider: (i, wrap) => {
      if (!wrap) return new PostgresLeaseWorkerIdProvider(o(i));
      const { db: d, leaseMs, ...rest } = o(i);
      return new LeasedWorkerIdProvider(() => wrap(new PostgresRegistry({ db: d, leaseMs, clock: systemClock })), `pg-${address(i)}`, rest);
    },
    close: async () => {
      await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await db.close();
    },
  };
}

async function redis(): Promise<Registries> {
  const client = new Redis(env('REDIS_URL'), { maxRetriesPerRequest: 1 });
  const keyPrefix = `${uniqueName('idmint-reclaim:', '')}:`;
  const dataDir = tempDir();
  const o = (i: number) => ({
    redis: client,
    app: 'reclaim',
    address: address(i),
    keyPrefix,
    dataDir,
    leaseMs: 2000,
    renewEveryMs: 500,
    stopMarginMs: 500,
    ...fast,
  });
  return {
    name: 'redis',
    provider: (i, wrap) => {
      if (!wrap) return new RedisWorkerIdProvider(o(i));
      const identity = `reclaim:${address(i)}`;
      return new LeasedWorkerIdProvider(() => wrap(new RedisRegistry({ redis: client, keyPrefix, leaseMs: 2000, clock: systemClock })), `redis-${identity}`, {
        identity,
        dataDir,
        renewEveryMs: 500,
        stopMarginMs: 500,
        ...fast,
      });
    },
    close: async () => {
      const keys = await client.keys(`${keyPrefix}*`);
      if (keys.length > 0) await client.del(...keys);
      client.disconnect();
    },
  };
}

/** Runs the starts; returns what the report needs. Fails on any refusal, a shared live id, a floor below an earlier timestamp, or a duplicate. */
async function run(r: Registries): Promise<{ starts: number; ids: number; workers: number; highest: number; killed: number; ms: number }> {
  const live = new Set<number>();
  const lastStamped = new Map<number, number>();
  const ids: bigint[] = [];
  const dead: SnowflakeSource[] = [];
  let next = 0;
  let killed = 0;
  let highest = -1;
  const started = Date.now();
  const lane = async (): Promise<void> => {
    for (let i = next++; i < STARTS; i = next++) {
      const kill = i % KILL_EVERY === KILL_EVERY - 1;
      let registry: Killable | undefined;
      const provider = r.provider(i, kill ? (inner) => (registry = killable(inner)) : undefined);
      let source: SnowflakeSource;
      try {
        source = await createSnowflakeSource({ provider });
      } catch (err) {
        throw new Error(`${r.name}: start ${i} of ${STARTS} was refused: ${(err as Error).message}`, { cause: err });
      }
      const id = source.workerId;
      const lease = source.lease as LeasedWorkerIdLease;
      expect(live.has(id), `${r.name}: start ${i} took worker ${id}, which a live holder has`).toBe(false);
      expect(lease.floorMs, `${r.name}: start ${i}'s floor on worker ${id}`).toBeGreaterThanOrEqual(lastStamped.get(id) ?? 0);
      live.add(id);
      highest = Math.max(highest, id);
      const mine = source.nextIds(20);
      ids.push(...mine);
      const stamp = LEAF_LAYOUT.decode(mine[mine.length - 1]!).timestamp;
      lastStamped.set(id, Math.max(lastStamped.get(id) ?? 0, stamp));
      await new Promise((res) => setImmediate(res));
      live.delete(id);
      if (kill) {
        registry!.kill(); // it issues nothing more: a process that died
        dead.push(source);
        killed++;
      } else await source.close();
    }
  };
  await Promise.all(Array.from({ length: LANES }, lane));
  const ms = Date.now() - started;
  await Promise.all(dead.map((s) => s.close()));
  expectNoDuplicates(ids, `${r.name}: Snowflake IDs of ${STARTS} starts`);
  return { starts: STARTS, ids: ids.length, workers: lastStamped.size, highest, killed, ms };
}

const registries: Registries[] = [];
afterAll(async () => {
  await Promise.all(registries.map((r) => r.close()));
});

// The three registries at once: each waits on its own server (fsyncs, round trips), not on this process.
describe.concurrent.each([
  ['zookeeper', zookeeper],
  ['postgres', postgres],
  ['redis', redis],
] as const)('worker ids reclaimed: %s', (_name, make) => {
  it(`${STARTS} starts with new addresses on the 10-bit space, 4 at a time, every 10th killed: every start served, no live id shared, 0 duplicates`, async () => {
    const r = await make();
    registries.push(r);
    const out = await run(r);
    console.info(
      `${r.name}: ${out.starts} starts (${out.killed} killed), ${out.workers} worker ids used (highest ${out.highest}), ${out.ids} IDs, 0 duplicates, ${out.ms} ms`,
    );
    expect(out.highest).toBeLessThanOrEqual(1023);
  }, 600_000);
});
