import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ClockBackwardsError } from '../../../src/core/errors.js';
import type { WorkerIdLease } from '../../../src/core/ports.js';
import type { ZooKeeperRegistry } from '../../../src/worker-id/index.js';
import {
  CreateMode,
  LEGACY_REPORT_GRACE_MS,
  ZkClient,
  ZooKeeperWorkerIdProvider,
  type ZkWorkerRecord,
  type ZooKeeperWorkerIdLease,
  type ZooKeeperWorkerIdProviderOptions,
} from '../../../src/worker-id/index.js';
import { capturingLogger, expireSessionBehindProxy, startProxy, steppedClock, tempDir, zkRoots } from './helpers.js';
import { env } from '../../support/env.js';
import { sleep, until } from '../../support/poll.js';
import { freePort } from '../../support/ports.js';

const run = promisify(execFile);
const fixture = fileURLToPath(new URL('./fixtures/zk-acquire.ts', import.meta.url));
const roots = zkRoots();
const newRoot = (): string => roots.next();
const leases: WorkerIdLease[] = [];

async function acquire(options: Partial<ZooKeeperWorkerIdProviderOptions> & { root: string; dataDir: string }, maxWorkerId = 1023): Promise<WorkerIdLease> {
  const lease = await new ZooKeeperWorkerIdProvider({ connect: env('ZK_CONNECT'), address: '10.1.1.1:8080', markAheadMs: 50, ...options }).acquire({
    maxWorkerId,
  });
  leases.push(lease);
  return lease;
}

/** A process that takes an id and holds it `holdMs` before it closes its lease. */
async function spawnAcquire(address: string, root: string, dataDir: string, holdMs = 0): Promise<{ workerId?: number; error?: string }> {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', fixture, env('ZK_CONNECT'), address, root, dataDir, String(holdMs)], { timeout: 30_000 });
  return JSON.parse(stdout.trim().split('\n').pop()!) as { workerId?: number; error?: string };
}

afterEach(async () => {
  await Promise.all(leases.splice(0).map((l) => l.close()));
});

afterAll(() => roots.removeAll());

describe('ZooKeeperWorkerIdProvider', () => {
  it('two processes with different ip:port get different ids; a restarted ip:port gets its old id', async () => {
    const root = newRoot();
    // Both alive at once (each holds its lease 3 s): a closed id may be taken again, a held one never.
    const [a, b] = await Promise.all([spawnAcquire('10.2.0.1:8080', root, tempDir(), 3000), spawnAcquire('10.2.0.2:8080', root, tempDir(), 3000)]);
    expect(a.workerId).toEqual(expect.any(Number));
    expect(b.workerId).toEqual(expect.any(Number));
    expect(a.workerId).not.toBe(b.workerId);
    // A fresh data dir: the id comes from ZooKeeper, not the local cache.
    const again = await spawnAcquire('10.2.0.1:8080', root, tempDir());
    expect(again.workerId).toBe(a.workerId);
  });

  it("records each id at <root>/workers/<id> (Leaf's {ip, port, timestamp}, the mark, the holder) with a lease at <root>/leases/<id>, and reports every few seconds", async () => {
    const root = newRoot();
    const lease = await acquire({ root, dataDir: tempDir(), address: '10.3.0.1:9090', reportEveryMs: 100 });
    const zk = await ZkClient.connect({ connect: env('ZK_CONNECT') });
    try {
      expect(await zk.getChildren(`${root}/workers`)).toEqual([String(lease.workerId)]);
      expect(await zk.getChildren(`${root}/leases`)).toEqual([String(lease.workerId)]);
      const read = async () => JSON.parse((await zk.getData(`${root}/workers/${lease.workerId}`)).data!.toString()) as ZkWorkerRecord;
      const first = await read();
      expect(first).toMatchObject({ ip: '10.3.0.1', port: '9090', identity: '10.3.0.1:9090' });
      expect(first.markMs).toBeGreaterThan(Date.now());
      await until('a newer report in the record', async () => (await read()).timestamp > first.timestamp);
      const lease2 = (await zk.getData(`${root}/leases/${lease.workerId}`)).stat as unknown as { ephemeralOwner: Buffer };
      expect(lease2.ephemeralOwner.equals(Buffer.alloc(8))).toBe(false); // an ephemeral node: it goes with the session
      await lease.close();
      // Released: the lease is gone and the mark is the last timestamp approved, so the id is free at once.
      expect(await zk.getChildren(`${root}/leases`)).toEqual([]);
      expect((await read()).markMs).toBeLessThanOrEqual(Date.now());
    } finally {
      zk.close();
    }
  });

  it('ZooKeeper down at start: starts on the cached id with a warning, and issues nothing until ZooKeeper leases it again', async () => {
    const root = newRoot();
    const dataDir = tempDir();
    const first = await acquire({ root, dataDir });
    await first.close();
    const { logger, lines } = capturingLogger();
    const port = await freePort();
    const lease = (await acquire({ root, dataDir, connect: `127.0.0.1:${port}`, connectTimeoutMs: 300, retryEveryMs: 100, logger })) as ZooKeeperWorkerIdLease;
    expect(lease.workerId).toBe(first.workerId);
    expect(lease.provider).toBe('zookeeper');
    expect(lines.some((l) => l.level === 40 && String(l.msg).includes('cached worker id'))).toBe(true);
    // Its lease may have expired and the id be taken meanwhile: nothing until it is leased again.
    expect(() => lease.assertIssuable(Date.now())).toThrow(expect.objectContaining({ code: 'NOT_READY' }));
    expect(lease.registered).toBe(false);
    expect(lease.health?.()).toMatchObject({ ok: false });
    const proxy = await startProxy(port, env('ZK_CONNECT'));
    try {
      await until('the id to be leased again', () => lease.registered);
      expect(lines.some((l) => String(l.msg).includes('worker id leased again'))).toBe(true);
      await until('the clock to pass the floor', () => Date.now() > lease.floorMs);
      lease.assertIssuable(Date.now());
      expect(lease.health?.()).toEqual({ ok: true });
    } finally {
      await lease.close();
      await proxy.close();
    }
  });

  it('no cache and no ZooKeeper: a clear WORKER_ID_UNAVAILABLE naming ZK_CONNECT', async () => {
    const connect = `127.0.0.1:${await freePort()}`;
    const err = await acquire({ root: newRoot(), dataDir: tempDir(), connect, connectTimeoutMs: 300 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'WORKER_ID_UNAVAILABLE' });
    expect((err as Error).message).toContain(`ZK_CONNECT=${connect}`);
  });

  it("a clock behind an id's mark takes another id; with no other id, it refuses naming both times", async () => {
    const root = newRoot();
    const first = await acquire({ root, dataDir: tempDir() }, 1);
    first.assertIssuable(Date.now());
    await first.close();
    const clock = steppedClock(-10_000);
    // A fresh data dir and another address: only ZooKeeper remembers how far the id's clock had got.
    const other = await acquire({ root, dataDir: tempDir(), clock, address: '10.1.1.2:8080' }, 1);
    expect(other.workerId).not.toBe(first.workerId);
    await other.close();
    const err = await acquire({ root, dataDir: tempDir(), clock, address: '10.1.1.3:8080' }, 0).catch((e: unknown) => e);
    if (first.workerId === 0) {
      expect(err).toBeInstanceOf(ClockBackwardsError);
      const e = err as ClockBackwardsError;
      expect(e.lastMs - e.nowMs).toBeGreaterThan(9000);
      expect(e.message).toContain(new Date(e.lastMs).toISOString());
      expect(e.message).toContain(new Date(e.nowMs).toISOString());
    } else {
      // Top-down: the first start took id 1, the second id 0; id 0's mark is behind no clock here.
      expect(first.workerId).toBe(1);
    }
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

  it('a layout with 2 worker bits: the 5th registration is WORKER_ID_UNAVAILABLE; once one closes, the next takes its id', async () => {
    const root = newRoot();
    const leases4: WorkerIdLease[] = [];
    for (let i = 1; i <= 4; i++) leases4.push(await acquire({ root, dataDir: tempDir(), address: `10.4.0.${i}:8080` }, 3));
    expect(leases4.map((l) => l.workerId).sort()).toEqual([0, 1, 2, 3]);
    const err = await acquire({ root, dataDir: tempDir(), address: '10.4.0.5:8080' }, 3).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'WORKER_ID_UNAVAILABLE' });
    expect((err as Error).message).toContain('0..3');
    await leases4[2]!.close();
    expect((await acquire({ root, dataDir: tempDir(), address: '10.4.0.6:8080' }, 3)).workerId).toBe(leases4[2]!.workerId);
  });

  it('session expiry: stops at once, takes its id again on a new session and serves on', async () => {
    const root = newRoot();
    const { logger, lines } = capturingLogger();
    const port = await freePort();
    let proxy = await startProxy(port, env('ZK_CONNECT'));
    try {
      const provider = new ZooKeeperWorkerIdProvider({
        connect: `127.0.0.1:${port}`,
        address: '10.1.1.1:8080',
        root,
        dataDir: tempDir(),
        logger,
        retryEveryMs: 100,
        reportEveryMs: 100,
        markAheadMs: 50,
      });
      const lease = await provider.acquire({ maxWorkerId: 1023 });
      leases.push(lease);
      const zk = registryOf(lease).client!;
      // Its session closed by a second client while it cannot reconnect: it hears SESSION_EXPIRED.
      proxy = await expireSessionBehindProxy(zk, proxy, port, env('ZK_CONNECT'));
      await until('the id to be leased again', () => lines.some((l) => String(l.msg).includes('worker id leased again')));
      const lost = lines.findIndex((l) => String(l.msg).includes('worker-id lease lost'));
      expect(lost).toBeGreaterThanOrEqual(0);
      expect(lost).toBeLessThan(lines.findIndex((l) => String(l.msg).includes('worker id leased again')));
      await until('the lease to be renewed', () => (lease as ZooKeeperWorkerIdLease).registered);
      lease.assertIssuable(Date.now());
    } finally {
      await proxy.close();
    }
  });
});

describe('ZooKeeperWorkerIdProvider after session loss', () => {
  it('revokes the lease when another holder took its id meanwhile, and that holder starts above its mark', async () => {
    const root = newRoot();
    const { logger, lines } = capturingLogger();
    const port = await freePort();
    let proxy = await startProxy(port, env('ZK_CONNECT'));
    try {
      const a = (await acquire(
        { root, dataDir: tempDir(), logger, retryEveryMs: 100, sessionTimeoutMs: 4000, reportEveryMs: 500, connect: `127.0.0.1:${port}` },
        0,
      )) as ZooKeeperWorkerIdLease;
      a.assertIssuable(Date.now());
      const confirmed = a.confirmedMs;
      const zk = registryOf(a).client!;
      await proxy.close();
      // Its session ends while it cannot hear it; another process takes the id before it can.
      for (let thief: ZkClient | null = null; ; await sleep(200)) {
        try {
          thief = await ZkClient.connect({ connect: env('ZK_CONNECT'), session: zk.session, connectTimeoutMs: 2000 });
          thief.close();
        } catch {
          break;
        }
      }
      // The id's mark is a lease ahead of the last renewal: a taker waits for its clock to pass it.
      const b = (await acquire({ root, dataDir: tempDir(), address: '10.1.9.9:8080', maxStartWaitMs: 15_000 }, 0)) as ZooKeeperWorkerIdLease;
      expect(b.workerId).toBe(a.workerId);
      expect(b.floorMs).toBeGreaterThanOrEqual(confirmed);
      proxy = await startProxy(port, env('ZK_CONNECT'));
      await until('the lease to be revoked', () => lines.some((l) => String(l.msg).includes('no more IDs')));
      expect(() => a.assertIssuable(Date.now())).toThrow(expect.objectContaining({ code: 'WORKER_ID_UNAVAILABLE' }));
      expect(a.health?.()).toMatchObject({ ok: false, message: expect.stringContaining('10.1.9.9:8080') });
    } finally {
      await proxy.close();
    }
  });
});

describe('a worker record without a readable mark', () => {
  it('is never used (its mark cannot be honoured); the other ids are', async () => {
    const root = newRoot();
    const zk = await ZkClient.connect({ connect: env('ZK_CONNECT') });
    try {
      await zk.mkdirp(`${root}/workers`);
      await zk.create(`${root}/workers/1`, Buffer.from('{"ip":"10.0.0.1"}'));
      expect((await acquire({ root, dataDir: tempDir(), address: '10.9.1.1:8080' }, 1)).workerId).toBe(0);
      const refused = await acquire({ root, dataDir: tempDir(), address: '10.9.1.2:8080' }, 1).catch((e: unknown) => e);
      expect(refused).toMatchObject({ code: 'WORKER_ID_UNAVAILABLE' });
    } finally {
      zk.close();
    }
  });
});

describe("Leaf's layout (an earlier version's, or Leaf's own nodes)", () => {
  it('keeps ids registered there reserved, lets their own ip:port adopt them above the last report, and seals the sequence past the layout', async () => {
    const root = newRoot();
    const zk = await ZkClient.connect({ connect: env('ZK_CONNECT') });
    try {
      const report = Date.now() - 10_000;
      await zk.mkdirp(`${root}/forever`);
      await zk.create(`${root}/forever/10.7.0.1:8080-0000000000`, Buffer.from(JSON.stringify({ ip: '10.7.0.1', port: '8080', timestamp: report })));
      await zk.create(`${root}/forever/10.7.0.2:8080-0000000001`, Buffer.from(JSON.stringify({ ip: '10.7.0.2', port: '8080', timestamp: report })));
      // Another address on a 2-id space: both ids are Leaf's, neither has a lease to prove its holder gone.
      const refused = await acquire({ root, leafRoot: root, dataDir: tempDir(), address: '10.7.0.3:8080' }, 1).catch((e: unknown) => e);
      expect(refused).toMatchObject({ code: 'WORKER_ID_UNAVAILABLE' });
      const adopted = (await acquire({ root, leafRoot: root, dataDir: tempDir(), address: '10.7.0.1:8080' }, 7)) as ZooKeeperWorkerIdLease;
      expect(adopted.workerId).toBe(0);
      expect(adopted.floorMs).toBe(report + LEGACY_REPORT_GRACE_MS);
      expect(await zk.getChildren(`${root}/forever`)).toEqual(['10.7.0.2:8080-0000000001']);
      // An earlier version starting now would get a sequence number the layout refuses.
      const probe = await zk.create(`${root}/forever/10.7.0.4:8080-`, null, CreateMode.PERSISTENT_SEQUENTIAL);
      expect(Number(probe.slice(probe.lastIndexOf('-') + 1))).toBeGreaterThan(7);
      await zk.remove(probe);
    } finally {
      zk.close();
    }
  });
});

/** The ZooKeeper registry behind a lease (its session, for tests that expire it). */
function registryOf(lease: WorkerIdLease): ZooKeeperRegistry {
  return (lease as unknown as { o: { registry: ZooKeeperRegistry } }).o.registry;
}
