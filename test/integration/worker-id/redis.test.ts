import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { RedisWorkerIdProvider, type LeasedWorkerIdLease, type RedisWorkerIdProviderOptions } from '../../../src/worker-id/index.js';
import { capturingLogger, startProxy, tempDir } from './helpers.js';
import { env } from '../../support/env.js';
import { freePort } from '../../support/ports.js';
import { uniqueName } from '../../support/names.js';
import { until } from '../../support/poll.js';
import { expectNoDuplicates } from '../../support/unique.js';

const redis = new Redis(env('REDIS_URL'), { maxRetriesPerRequest: 1 });
const prefixes: string[] = [];
// A short lease: a new registry's first take waits out the guard (two leases).
const quick = { leaseMs: 500, renewEveryMs: 100, stopMarginMs: 150, markAheadMs: 50 };

function prefix(): string {
  const p = `${uniqueName('idmint-test:', '')}:`;
  prefixes.push(p);
  return p;
}

const provider = (o: Partial<RedisWorkerIdProviderOptions> & { keyPrefix: string; address: string }) =>
  new RedisWorkerIdProvider({ redis, app: 'x', dataDir: tempDir(), ...quick, ...o });

afterAll(async () => {
  for (const p of prefixes) {
    const keys = await redis.keys(`${p}*`);
    if (keys.length > 0) await redis.del(...keys);
  }
  redis.disconnect();
});

describe('RedisWorkerIdProvider', () => {
  it('records each id in one hash (mark|holder|app:address) with a lease key that expires', async () => {
    const keyPrefix = prefix();
    const a = await provider({ keyPrefix, app: 'orders', address: '10.0.0.1:80' }).acquire({ maxWorkerId: 1023 });
    const b = await provider({ keyPrefix, app: 'users', address: '10.0.0.1:80' }).acquire({ maxWorkerId: 1023 });
    expect(a.workerId).not.toBe(b.workerId);
    const registry = await redis.hgetall(`${keyPrefix}{worker-ids}:registry`);
    expect(registry[String(a.workerId)]).toMatch(/^\d+\|[0-9a-f]{24}\|orders:10\.0\.0\.1:80$/);
    expect(registry[String(b.workerId)]).toMatch(/^\d+\|[0-9a-f]{24}\|users:10\.0\.0\.1:80$/);
    expect(registry['#fence']).toMatch(/^[0-9a-f]+:[0-9a-f]*$/);
    const ttl = await redis.pttl(`${keyPrefix}{worker-ids}:lease:${a.workerId}`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(500);
    await Promise.all([a.close(), b.close()]);
    expect(await redis.exists(`${keyPrefix}{worker-ids}:lease:${a.workerId}`)).toBe(0);
  });

  it('twenty concurrent starts get twenty distinct ids from the scripts', async () => {
    const keyPrefix = prefix();
    const leases = await Promise.all(Array.from({ length: 20 }, (_, i) => provider({ keyPrefix, address: `10.0.1.${i}:80` }).acquire({ maxWorkerId: 1023 })));
    const distinct = leases.map((l) => l.workerId);
    expectNoDuplicates(distinct, 'worker ids');
    expect(distinct).toHaveLength(20);
    await Promise.all(leases.map((l) => l.close()));
  });

  it('Redis down at start: starts on the cached id with a warning, issues once Redis leases it again', async () => {
    const keyPrefix = prefix();
    const dataDir = tempDir();
    await provider({ keyPrefix, address: '10.0.2.1:80', dataDir })
      .acquire({ maxWorkerId: 1023 })
      .then((l) => l.close());
    const port = await freePort();
    const viaProxy = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, retryStrategy: () => 100 });
    viaProxy.on('error', () => undefined);
    const { logger, lines } = capturingLogger();
    const lease = (await new RedisWorkerIdProvider({
      redis: viaProxy,
      app: 'x',
      address: '10.0.2.1:80',
      keyPrefix,
      dataDir,
      logger,
      ...quick,
      retryEveryMs: 100,
    }).acquire({ maxWorkerId: 1023 })) as LeasedWorkerIdLease;
    expect(lines.some((l) => l.level === 40 && String(l.msg).includes('cached worker id'))).toBe(true);
    expect(() => lease.assertIssuable(Date.now())).toThrow(expect.objectContaining({ code: 'NOT_READY' }));
    const proxy = await startProxy(port, new URL(env('REDIS_URL')).host);
    try {
      await until('the cached id to be leased again', () => lease.registered);
      await until('the clock to pass the floor', () => Date.now() > lease.floorMs);
      lease.assertIssuable(Date.now());
    } finally {
      await lease.close();
      await proxy.close();
      viaProxy.disconnect();
    }
  });

  it('Redis down and no cache: WORKER_ID_UNAVAILABLE naming the file', async () => {
    const dead = new Redis({
      port: await freePort(),
      host: '127.0.0.1',
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    dead.on('error', () => undefined);
    const err = await new RedisWorkerIdProvider({ redis: dead, app: 'x', address: '10.0.3.1:80', keyPrefix: prefix(), dataDir: tempDir() })
      .acquire({ maxWorkerId: 1023 })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'WORKER_ID_UNAVAILABLE' });
    expect((err as Error).message).toContain('no cached worker id');
    dead.disconnect();
  });

  it("another Redis wrote the registry (a restart, a failover): holders stop, and every id waits out the guard (two leases past the taker's clock)", async () => {
    const keyPrefix = prefix();
    const a = (await provider({ keyPrefix, address: '10.0.4.1:80', retryEveryMs: 50 }).acquire({ maxWorkerId: 0 })) as LeasedWorkerIdLease;
    a.assertIssuable(Date.now());
    // What a restarted Redis looks like to the scripts: the registry's fence names another run.
    await redis.hset(`${keyPrefix}{worker-ids}:registry`, '#fence', 'ffff:0');
    const before = Date.now();
    await until('the holder to stop', () => {
      try {
        a.assertIssuable(Date.now());
        return false;
      } catch {
        return true;
      }
    });
    await until('the holder to take its id again', () => a.registered, { timeoutMs: 10_000 });
    expect(a.floorMs).toBeGreaterThanOrEqual(before + 2 * quick.leaseMs);
    expect(Number(await redis.hget(`${keyPrefix}{worker-ids}:registry`, '#guard'))).toBeGreaterThanOrEqual(before + 2 * quick.leaseMs);
    await a.close();
  });

  it("the earlier version's hash: its ids stay reserved and its counter is sealed past the layout", async () => {
    const keyPrefix = prefix();
    await redis.hset(`${keyPrefix}worker-ids`, 'x:10.0.5.1:80', 0, 'x:10.0.5.2:80', 1, '#next', 2);
    const lease = await provider({ keyPrefix, address: '10.0.5.3:80' }).acquire({ maxWorkerId: 2 });
    expect(lease.workerId).toBe(2);
    expect(Number(await redis.hget(`${keyPrefix}worker-ids`, '#next'))).toBe(3);
    const refused = await provider({ keyPrefix, address: '10.0.5.4:80' })
      .acquire({ maxWorkerId: 2 })
      .catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'WORKER_ID_UNAVAILABLE' });
    await lease.close();
  });
});
