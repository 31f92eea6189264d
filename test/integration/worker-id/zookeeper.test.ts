import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ClockBackwardsError } from '../../../src/core/errors.js';
import type { WorkerIdLease } from '../../../src/core/ports.js';
import { localMarkPath, readLocalMark, ZkClient, ZooKeeperWorkerIdProvider, type ZooKeeperWorkerIdProviderOptions } from '../../../src/worker-id/index.js';
import { capturingLogger, expireSessionBehindProxy, startProxy, steppedClock, tempDir, zkRoots } from './helpers.js';
import { env } from '../../support/env.js';
import { until } from '../../support/poll.js';
import { freePort } from '../../support/ports.js';

const run = promisify(execFile);
const fixture = fileURLToPath(new URL('./fixtures/zk-acquire.ts', import.meta.url));
const roots = zkRoots();
const newRoot = (): string => roots.next();
const leases: WorkerIdLease[] = [];


async function acquire(options: Partial<ZooKeeperWorkerIdProviderOptions> & { root: string; dataDir: string }, maxWorkerId = 1023): Promise<WorkerIdLease> {
  const lease = await new ZooKeeperWorkerIdProvider({ connect: env('ZK_CONNECT'), address: '10.1.1.1:8080', markAheadMs: 50, ...options }).acquire({ maxWorkerId });
  leases.push(lease);
  return lease;
}

async function spawnAcquire(address: string, root: string, dataDir: string): Promise<{ workerId?: number; error?: string }> {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', fixture, env('ZK_CONNECT'), address, root, dataDir], { timeout: 30_000 });
  return JSON.parse(stdout.trim().split('\n').pop()!) as { workerId?: number; error?: string };
}

afterEach(async () => {
  await Promise.all(leases.splice(0).map((l) => l.close()));
});

afterAll(() => roots.removeAll());

describe('ZooKeeperWorkerIdProvider', () => {
  it('two processes with different ip:port get different ids; a restarted ip:port gets its old id', async () => {
    const root = newRoot();
    const [a, b] = await Promise.all([spawnAcquire('10.2.0.1:8080', root, tempDir()), spawnAcquire('10.2.0.2:8080', root, tempDir())]);
    expect(a.workerId).toEqual(expect.any(Number));
    expect(b.workerId).toEqual(expect.any(Number));
    expect(a.workerId).not.toBe(b.workerId);
    // A fresh data dir: the id comes from ZooKeeper, not the local cache.
    const again = await spawnAcquire('10.2.0.1:8080', root, tempDir());
    expect(again.workerId).toBe(a.workerId);
  });

  it('registers Leaf-style nodes and reports {ip, port, timestamp} every few seconds', async () => {
    const root = newRoot();
    const lease = await acquire({ root, dataDir: tempDir(), address: '10.3.0.1:9090', reportEveryMs: 100 });
    const zk = await ZkClient.connect({ connect: env('ZK_CONNECT') });
    try {
      const children = await zk.getChildren(`${root}/forever`);
      expect(children).toEqual([`10.3.0.1:9090-${String(lease.workerId).padStart(10, '0')}`]);
      const path = `${root}/forever/${children[0]}`;
      const read = async () => JSON.parse((await zk.getData(path)).data!.toString()) as { ip: string; port: string; timestamp: number };
      const first = await read();
      expect(first).toMatchObject({ ip: '10.3.0.1', port: '9090' });
      await until('a newer report in the node', async () => (await read()).timestamp > first.timestamp);
    } finally {
      zk.close();
    }
  });

  it('ZooKeeper down at start: uses the cached id with a warning', async () => {
    const root = newRoot();
    const dataDir = tempDir();
    const first = await acquire({ root, dataDir });
    await first.close();
    const { logger, lines } = capturingLogger();
    const connect = `127.0.0.1:${await freePort()}`;
    const lease = await acquire({ root, dataDir, connect, connectTimeoutMs: 300, logger });
    expect(lease.workerId).toBe(first.workerId);
    expect(lease.provider).toBe('zookeeper');
    expect(lines.some((l) => l.level === 40 && String(l.msg).includes('cached worker id'))).toBe(true);
    lease.assertIssuable(Date.now() + 5000);
    expect(readLocalMark(localMarkPath(dataDir, 'zk-10.1.1.1:8080'))!.markMs).toBeGreaterThanOrEqual(Date.now() + 5000);
  });

  it('no cache and no ZooKeeper: a clear WORKER_ID_UNAVAILABLE naming ZK_CONNECT', async () => {
    const connect = `127.0.0.1:${await freePort()}`;
    const err = await acquire({ root: newRoot(), dataDir: tempDir(), connect, connectTimeoutMs: 300 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'WORKER_ID_UNAVAILABLE' });
    expect((err as Error).message).toContain(`ZK_CONNECT=${connect}`);
  });

  it('refuses to start while the clock is behind the last ZooKeeper report, naming both times', async () => {
    const root = newRoot();
    const first = await acquire({ root, dataDir: tempDir() });
    await first.close();
    const clock = steppedClock(-10_000);
    // A fresh data dir: only ZooKeeper remembers how far this worker's clock had got.
    const err = await acquire({ root, dataDir: tempDir(), clock }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClockBackwardsError);
    const e = err as ClockBackwardsError;
    expect(e.lastMs - e.nowMs).toBeGreaterThan(9000);
    expect(e.message).toContain(new Date(e.lastMs).toISOString());
    expect(e.message).toContain(new Date(e.nowMs).toISOString());
    expect(e.message).toContain('ZooKeeper');
  });

  it('refuses to start while the clock is behind the local mark, naming both times', async () => {
    const root = newRoot();
    const dataDir = tempDir();
    const first = await acquire({ root, dataDir });
    // IDs stamped up to now + 4 s were allowed out, so the mark is at least that far ahead.
    first.assertIssuable(Date.now() + 4000);
    await first.close();
    // Past ZooKeeper's last report (taken at start) yet behind the mark: the gap only the mark closes.
    const err = await acquire({ root, dataDir, clock: steppedClock(1000) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClockBackwardsError);
    expect((err as Error).message).toContain('local high-water mark');
    expect((err as Error).message).toContain(new Date((err as ClockBackwardsError).lastMs).toISOString());
  });

  it('a layout with 2 worker bits: the 5th registration is WORKER_ID_UNAVAILABLE', async () => {
    const root = newRoot();
    const ids: number[] = [];
    for (let i = 1; i <= 4; i++) ids.push((await acquire({ root, dataDir: tempDir(), address: `10.4.0.${i}:8080` }, 3)).workerId);
    expect(ids.sort()).toEqual([0, 1, 2, 3]);
    const err = await acquire({ root, dataDir: tempDir(), address: '10.4.0.5:8080' }, 3).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'WORKER_ID_UNAVAILABLE' });
    expect((err as Error).message).toContain('0..3');
  });

  it('session expiry: keeps serving on the local mark, reconnects and confirms its node', async () => {
    const root = newRoot();
    const { logger, lines } = capturingLogger();
    const port = await freePort();
    let proxy = await startProxy(port, env('ZK_CONNECT'));
    try {
      const lease = await acquire({ root, dataDir: tempDir(), logger, retryEveryMs: 100, reportEveryMs: 100, connect: `127.0.0.1:${port}` });
      const zk = (lease as unknown as { zk: ZkClient }).zk;
      // Its session closed by a second client while it cannot reconnect: it hears SESSION_EXPIRED.
      proxy = await expireSessionBehindProxy(zk, proxy, port, env('ZK_CONNECT'));
      await until('the session-expired line', () => lines.some((l) => String(l.msg).includes('session expired')));
      lease.assertIssuable(Date.now());
      await until('the session to be re-established', () => lines.some((l) => String(l.msg).includes('re-established')));
      expect((lease as unknown as { registered: boolean }).registered).toBe(true);
      lease.assertIssuable(Date.now() + 2000);
    } finally {
      await proxy.close();
    }
  });
});

describe('ZooKeeperWorkerIdProvider after session loss', () => {
  it('revokes the lease when its node vanished meanwhile', async () => {
    const root = newRoot();
    const { logger, lines } = capturingLogger();
    const port = await freePort();
    let proxy = await startProxy(port, env('ZK_CONNECT'));
    const admin = await ZkClient.connect({ connect: env('ZK_CONNECT') });
    try {
      const lease = await acquire({ root, dataDir: tempDir(), logger, retryEveryMs: 100, connect: `127.0.0.1:${port}` });
      const zk = (lease as unknown as { zk: ZkClient }).zk;
      for (const child of await admin.getChildren(`${root}/forever`)) await admin.remove(`${root}/forever/${child}`);
      proxy = await expireSessionBehindProxy(zk, proxy, port, env('ZK_CONNECT'));
      await until('the lease to be revoked', () => lines.some((l) => String(l.msg).includes('no more IDs')));
      expect(() => lease.assertIssuable(Date.now())).toThrow(expect.objectContaining({ code: 'WORKER_ID_UNAVAILABLE' }));
    } finally {
      admin.close();
      await proxy.close();
    }
  });
});

describe('ZooKeeperWorkerIdProvider started on the cached id', () => {
  it('confirms its node once ZooKeeper comes back, and resumes reporting', async () => {
    const root = newRoot();
    const dataDir = tempDir();
    const first = await acquire({ root, dataDir });
    await first.close();
    const port = await freePort();
    const { logger, lines } = capturingLogger();
    const lease = await acquire({ root, dataDir, connect: `127.0.0.1:${port}`, connectTimeoutMs: 300, retryEveryMs: 100, reportEveryMs: 100, logger });
    expect(lease.workerId).toBe(first.workerId);
    expect((lease as unknown as { registered: boolean }).registered).toBe(false);
    const proxy = await startProxy(port, env('ZK_CONNECT'));
    try {
      await until('the node to be confirmed', () => (lease as unknown as { registered: boolean }).registered);
      expect(lines.some((l) => String(l.msg).includes('worker node confirmed'))).toBe(true);
      lease.assertIssuable(Date.now());
    } finally {
      await lease.close();
      await proxy.close();
    }
  });
});
