import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { RedisWorkerIdProvider } from '../../../src/worker-id/index.js';
import { capturingLogger, tempDir } from './helpers.js';
import { env } from '../../support/env.js';
import { freePort } from '../../support/ports.js';
import { uniqueName } from '../../support/names.js';
import { expectNoDuplicates } from '../../support/unique.js';

const redis = new Redis(env('REDIS_URL'), { maxRetriesPerRequest: 1 });
const prefixes: string[] = [];

function prefix(): string {
  const p = `${uniqueName('idmint-test:', '')}:`;
  prefixes.push(p);
  return p;
}

/** A client for a port nobody listens on that fails commands at once instead of queueing them. */
async function deadRedis(): Promise<Redis> {
  const client = new Redis({ port: await freePort(), host: '127.0.0.1', lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => undefined); // the refusal is the point; the command's rejection reports it
  return client;
}

afterAll(async () => {
  for (const p of prefixes) await redis.del(`${p}worker-ids`);
  redis.disconnect();
});

describe('RedisWorkerIdProvider', () => {
  it('keys ids by app and address in one hash', async () => {
    const keyPrefix = prefix();
    const make = (app: string, address: string) => new RedisWorkerIdProvider({ redis, app, address, keyPrefix, dataDir: tempDir(), markAheadMs: 50 });
    const a = await make('orders', '10.0.0.1:80').acquire({ maxWorkerId: 1023 });
    const b = await make('users', '10.0.0.1:80').acquire({ maxWorkerId: 1023 });
    expect(a.workerId).not.toBe(b.workerId);
    expect(await redis.hgetall(`${keyPrefix}worker-ids`)).toEqual({ 'orders:10.0.0.1:80': String(a.workerId), 'users:10.0.0.1:80': String(b.workerId), '#next': '2' });
    await Promise.all([a.close(), b.close()]);
  });

  it('twenty concurrent starts get twenty distinct ids from the script', async () => {
    const keyPrefix = prefix();
    const leases = await Promise.all(
      Array.from({ length: 20 }, (_, i) => new RedisWorkerIdProvider({ redis, app: 'x', address: `10.0.1.${i}:80`, keyPrefix, dataDir: tempDir() }).acquire({ maxWorkerId: 1023 })),
    );
    const distinct = leases.map((l) => l.workerId);
    expectNoDuplicates(distinct, 'worker ids');
    expect(distinct).toHaveLength(20);
    await Promise.all(leases.map((l) => l.close()));
  });

  it('Redis down at start: the cached id from the local file, with a warning', async () => {
    const keyPrefix = prefix();
    const dataDir = tempDir();
    await new RedisWorkerIdProvider({ redis, app: 'x', address: '10.0.2.1:80', keyPrefix, dataDir }).acquire({ maxWorkerId: 1023 }).then((l) => l.close());
    const second = await new RedisWorkerIdProvider({ redis, app: 'x', address: '10.0.2.2:80', keyPrefix, dataDir: tempDir(), markAheadMs: 50 }).acquire({ maxWorkerId: 1023 });
    const { logger, lines } = capturingLogger();
    const dead = await deadRedis();
    const lease = await new RedisWorkerIdProvider({ redis: dead, app: 'x', address: '10.0.2.1:80', keyPrefix, dataDir, logger, maxStartWaitMs: 3000 }).acquire({ maxWorkerId: 1023 });
    expect(lease.workerId).not.toBe(second.workerId);
    expect(lease.workerId).toBe(Number(await redis.hget(`${keyPrefix}worker-ids`, 'x:10.0.2.1:80')));
    expect(lines.some((l) => l.level === 40 && String(l.msg).includes('cached worker id'))).toBe(true);
    await Promise.all([lease.close(), second.close()]);
    dead.disconnect();
  });

  it('Redis down and no cache: WORKER_ID_UNAVAILABLE naming the file', async () => {
    const dead = await deadRedis();
    const err = await new RedisWorkerIdProvider({ redis: dead, app: 'x', address: '10.0.3.1:80', keyPrefix: prefix(), dataDir: tempDir() })
      .acquire({ maxWorkerId: 1023 })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'WORKER_ID_UNAVAILABLE' });
    expect((err as Error).message).toContain('no cached worker id');
    dead.disconnect();
  });
});
