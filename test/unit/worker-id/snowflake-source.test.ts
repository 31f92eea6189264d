import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ClockBackwardsError, IdmintError } from '../../../src/core/errors.js';
import { createLayout, LEAF_LAYOUT, MIN_TIME_BASED_ID, UID_LAYOUT } from '../../../src/core/layout.js';
import type { BizTag, WorkerIdLease, WorkerIdProvider } from '../../../src/core/ports.js';
import { createSnowflakeSource } from '../../../src/dispenser/sources/snowflake.js';
import { createSnowflakeSourceFromConfig, preferredId, workerIdProviderFromConfig } from '../../../src/app/worker-id.js';
import { networkInterfaces } from 'node:os';
import { FileWorkerIdProvider, readLocalMark, StaticWorkerIdProvider } from '../../../src/worker-id/index.js';
import { expectNoDuplicates } from '../../support/unique.js';

const tag = { bizTag: 'order', mode: 'snowflake' } as BizTag;
const dir = () => mkdtempSync(join(tmpdir(), 'idmint-sfs-'));

/** Counts acquisitions, to prove a refused start registers nothing. */
function counting(inner: WorkerIdProvider): WorkerIdProvider & { calls: number } {
  const p = { calls: 0, acquire: (o: { maxWorkerId: number }): Promise<WorkerIdLease> => (p.calls++, inner.acquire(o)) };
  return p;
}

describe('SnowflakeSource', () => {
  it('hands out distinct, increasing decimal strings ≥ 2^53 carrying its worker id', async () => {
    const source = await createSnowflakeSource({ provider: new StaticWorkerIdProvider(42) });
    const ids = [...(await source.take(tag, 5000)), ...(await source.take(tag, 1)), source.nextId().toString()];
    expectNoDuplicates(ids);
    for (const id of ids) expect(id).toMatch(/^[1-9]\d*$/);
    const big = ids.map(BigInt);
    for (let i = 1; i < big.length; i++) expect(big[i]! > big[i - 1]!).toBe(true);
    expect(big[0]! >= MIN_TIME_BASED_ID).toBe(true);
    expect(source.decode(big[0]!).worker).toBe(42);
    expect(source.name).toBe('snowflake');
    expect(source.workerId).toBe(42);
    await source.close();
  });

  it('refuses a layout whose IDs would fall below 2^53 before registering a worker id (invariant 4)', async () => {
    const provider = counting(new StaticWorkerIdProvider(1));
    const recent = createLayout({ name: 'recent', timeBits: 41, workerBits: 10, sequenceBits: 12, epoch: Date.now() - 86_400_000 });
    await expect(createSnowflakeSource({ provider, layout: recent })).rejects.toMatchObject({ code: 'CLOCK_BACKWARDS' });
    expect(provider.calls).toBe(0);
  });

  it('refuses a worker id beyond the layout: WORKER_ID_UNAVAILABLE', async () => {
    const tiny = createLayout({ name: 'tiny', timeBits: 41, workerBits: 2, sequenceBits: 20, epoch: LEAF_LAYOUT.epochMs });
    await expect(createSnowflakeSource({ provider: new StaticWorkerIdProvider(4), layout: tiny })).rejects.toMatchObject({ code: 'WORKER_ID_UNAVAILABLE' });
  });

  it('never hands out an ID stamped past the persisted mark, as the clock moves', async () => {
    const dataDir = dir();
    const clock = { ms: Date.now(), now: () => clock.ms };
    const source = await createSnowflakeSource({ provider: new FileWorkerIdProvider({ dataDir, clock, markAheadMs: 100 }), clock });
    for (let step = 0; step < 50; step++) {
      clock.ms += 37;
      const ids = step % 2 ? [source.nextId()] : source.nextIds(10);
      const stamped = source.decode(ids[ids.length - 1]!).timestamp;
      expect(readLocalMark(join(dataDir, 'worker-id.local.json'))!.markMs).toBeGreaterThanOrEqual(stamped);
    }
    await source.close();
  });

  it('guards second-resolution layouts up to the end of the tick', async () => {
    const dataDir = dir();
    const source = await createSnowflakeSource({ provider: new FileWorkerIdProvider({ dataDir, markAheadMs: 1 }), layout: UID_LAYOUT });
    const id = source.nextId();
    expect(readLocalMark(join(dataDir, 'worker-id.local.json'))!.markMs).toBeGreaterThanOrEqual(source.decode(id).timestamp + 999);
    await source.close();
  });

  it('a restart behind the mark refuses; the closed source refuses too', async () => {
    const dataDir = dir();
    const clock = { ms: Date.now(), now: () => clock.ms };
    const first = await createSnowflakeSource({ provider: new FileWorkerIdProvider({ dataDir, clock }), clock });
    first.nextIds(100);
    await first.close();
    await first.close();
    expect(() => first.nextId()).toThrow(IdmintError);
    await expect(first.take(tag, 1)).rejects.toMatchObject({ code: 'NOT_READY' });
    clock.ms -= 2000;
    await expect(createSnowflakeSource({ provider: new FileWorkerIdProvider({ dataDir, clock }), clock })).rejects.toBeInstanceOf(ClockBackwardsError);
  });

  it('validates count', async () => {
    const source = await createSnowflakeSource({ provider: new StaticWorkerIdProvider(0) });
    await expect(source.take(tag, 0)).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    expect(() => source.nextIds(1.5)).toThrow(IdmintError);
    await source.close();
  });
});

describe('workerIdProviderFromConfig', () => {
  const base = {
    IDMINT_DATA_DIR: '/tmp/x',
    IDMINT_HOST: '127.0.0.1',
    IDMINT_PORT: 8080,
    ZK_CONNECT: undefined,
    IDMINT_WORKER_ID: undefined,
    IDMINT_ADVERTISE: undefined,
    DATABASE_URL: undefined,
    REDIS_URL: undefined,
    IDMINT_WORKER_ID_PROVIDER: 'auto' as const,
    IDMINT_POOL_KEY_PREFIX: '',
    IDMINT_PROCESSES: 1,
    IDMINT_WORKER_ID_LEASE_MS: 10_000,
    IDMINT_WORKER_ID_WAIT_MS: 60_000,
  };
  const externalIpv4 =
    Object.values(networkInterfaces())
      .flat()
      .find((a) => a?.family === 'IPv4' && !a.internal)?.address ?? '127.0.0.1';

  it('static wins, then ZooKeeper, then a shared Postgres, then the file', async () => {
    expect((await workerIdProviderFromConfig({ ...base, IDMINT_WORKER_ID: 3, ZK_CONNECT: 'zk:2181' })).constructor.name).toBe('StaticWorkerIdProvider');
    const zk = await workerIdProviderFromConfig({ ...base, ZK_CONNECT: 'zk:2181' });
    expect(zk.constructor.name).toBe('ZooKeeperWorkerIdProvider');
    // Loopback names every machine alike; the advertised address uses the machine's own IP.
    expect((zk as unknown as { zookeeper: { address: string } }).zookeeper.address).toBe(`${externalIpv4}:8080`);
    const db = { query: async () => ({ rows: [] }) };
    expect((await workerIdProviderFromConfig({ ...base, DATABASE_URL: 'postgres://db/x' }, { db })).constructor.name).toBe('PostgresLeaseWorkerIdProvider');
    const advertised = await workerIdProviderFromConfig({ ...base, ZK_CONNECT: 'zk:2181', IDMINT_ADVERTISE: '10.0.0.9:9000' });
    expect((advertised as unknown as { zookeeper: { address: string } }).zookeeper.address).toBe('10.0.0.9:9000');
    expect((await workerIdProviderFromConfig(base)).constructor.name).toBe('FileWorkerIdProvider');
  });

  it('names a provider with IDMINT_WORKER_ID_PROVIDER, and refuses one whose server is not configured', async () => {
    const redis = { defineCommand: () => undefined } as never;
    const viaRedis = await workerIdProviderFromConfig({ ...base, IDMINT_WORKER_ID_PROVIDER: 'redis', REDIS_URL: 'redis://r:6379' }, { redis });
    expect(viaRedis.constructor.name).toBe('RedisWorkerIdProvider');
    expect((await workerIdProviderFromConfig({ ...base, IDMINT_WORKER_ID_PROVIDER: 'file', ZK_CONNECT: 'zk:2181' })).constructor.name).toBe(
      'FileWorkerIdProvider',
    );
    await expect(workerIdProviderFromConfig({ ...base, IDMINT_WORKER_ID_PROVIDER: 'redis' })).rejects.toThrow(
      /IDMINT_WORKER_ID_PROVIDER=redis needs REDIS_URL/,
    );
    await expect(workerIdProviderFromConfig({ ...base, IDMINT_WORKER_ID_PROVIDER: 'zookeeper' })).rejects.toThrow(/needs ZK_CONNECT/);
  });

  it("IDMINT_WORKER_ID_ORDINAL: a number or the host name's last number, spread over IDMINT_PROCESSES; only with a leasing registry", async () => {
    expect(preferredId({ IDMINT_WORKER_ID_ORDINAL: '3', IDMINT_PROCESSES: 1, IDMINT_PROCESS_INDEX: undefined })).toBe(3);
    expect(preferredId({ IDMINT_WORKER_ID_ORDINAL: 'hostname', IDMINT_PROCESSES: 1, IDMINT_PROCESS_INDEX: undefined }, 'idmint-api-12')).toBe(12);
    expect(preferredId({ IDMINT_WORKER_ID_ORDINAL: '3', IDMINT_PROCESSES: 4, IDMINT_PROCESS_INDEX: 2 })).toBe(14);
    expect(preferredId({ IDMINT_WORKER_ID_ORDINAL: undefined, IDMINT_PROCESSES: 1, IDMINT_PROCESS_INDEX: undefined })).toBeUndefined();
    expect(() => preferredId({ IDMINT_WORKER_ID_ORDINAL: 'hostname', IDMINT_PROCESSES: 1, IDMINT_PROCESS_INDEX: undefined }, 'laptop')).toThrow(
      /does not end in -<number>/,
    );
    const zk = await workerIdProviderFromConfig({ ...base, ZK_CONNECT: 'zk:2181', IDMINT_WORKER_ID_ORDINAL: '5' });
    expect((zk as unknown as { options: { preferredWorkerId: number } }).options.preferredWorkerId).toBe(5);
    await expect(workerIdProviderFromConfig({ ...base, IDMINT_WORKER_ID_ORDINAL: '5' })).rejects.toThrow(/needs a registry that leases ids/);
    await expect(workerIdProviderFromConfig({ ...base, IDMINT_WORKER_ID: 1, IDMINT_WORKER_ID_ORDINAL: '5' })).rejects.toThrow(/set one/);
  });

  it('createSnowflakeSourceFromConfig serves from the file provider by default', async () => {
    const source = await createSnowflakeSourceFromConfig({ ...base, IDMINT_DATA_DIR: dir() });
    expect(source.lease.provider).toBe('file');
    expect(source.nextId() >= MIN_TIME_BASED_ID).toBe(true);
    await source.close();
  });
});
