import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { WorkerIdLease, WorkerIdProvider } from '../../src/core/ports.js';
import type { LeasedWorkerIdLease } from '../../src/worker-id/index.js';
import { freePort } from '../support/ports.js';
import { sleep, until } from '../support/poll.js';
import { expectNoDuplicates } from '../support/unique.js';
import { startProxy, tempDir } from '../integration/worker-id/helpers.js';

/** How a harness builds one provider: its data dir, a preferred id, a TCP proxy (port) to reach the registry through. */
export interface ProviderOptions {
  dataDir?: string;
  preferredWorkerId?: number;
  via?: number;
}

/**
 * One contract for every WorkerIdProvider (CosId's MachineIdDistributorSpec). A harness is one
 * isolated namespace (ZooKeeper root, Redis prefix, Postgres schema, data dirs) on a real server.
 */
export interface ProviderHarness {
  /** A provider for the process at address number `i`; equal `i` means the same ip:port restarted. */
  provider(i: number, options?: ProviderOptions): WorkerIdProvider;
  close(): Promise<void>;
}

/** A provider that leases ids and reclaims them (leased-provider.ts): the reclamation rules apply. */
export interface ReclaimingHarness extends ProviderHarness {
  /** The lease the harness configures, ms (ZooKeeper: the session timeout it negotiates at least). */
  leaseMs: number;
  /** How often its holders renew, ms. */
  renewEveryMs: number;
  /** `host:port` of the registry's server, for a proxy the test can cut. */
  target: string;
}

/** `onRestart`: what a restart of one address gets: its old id back, or a fresh one (uid-generator). */
export function workerIdProviderContract(name: string, onRestart: 'same id' | 'new id', createHarness: () => Promise<ProviderHarness>): void {
  describe(`WorkerIdProvider contract: ${name}`, () => {
    let h: ProviderHarness;
    const leases: WorkerIdLease[] = [];
    const acquire = async (i: number, maxWorkerId = 1023) => {
      const lease = await h.provider(i).acquire({ maxWorkerId });
      leases.push(lease);
      return lease;
    };

    beforeEach(async () => {
      h = await createHarness();
    });
    afterEach(async () => {
      await Promise.all(leases.splice(0).map((l) => l.close()));
      await h.close();
    });

    it('gives distinct addresses distinct ids in range, also when they start together', async () => {
      const sequential = [await acquire(0), await acquire(1)];
      const concurrent = await Promise.all([2, 3, 4, 5].map((i) => acquire(i)));
      const ids = [...sequential, ...concurrent].map((l) => l.workerId);
      expectNoDuplicates(ids);
      expect(ids).toHaveLength(6);
      for (const id of ids) {
        expect(Number.isSafeInteger(id)).toBe(true);
        expect(id).toBeGreaterThanOrEqual(0);
        expect(id).toBeLessThanOrEqual(1023);
      }
      expect(new Set(leases.map((l) => l.provider)).size).toBe(1);
    });

    it(`a restarted address gets the ${onRestart}`, async () => {
      const first = await acquire(0);
      const other = await acquire(1);
      await first.close();
      const again = await acquire(0);
      if (onRestart === 'same id') expect(again.workerId).toBe(first.workerId);
      else expect(again.workerId).not.toBe(first.workerId);
      expect(again.workerId).not.toBe(other.workerId);
    });

    it('never hands out an id beyond maxWorkerId: the space runs out with WORKER_ID_UNAVAILABLE', async () => {
      const maxWorkerId = 3;
      const got: number[] = [];
      let refusal: unknown;
      for (let i = 0; i <= maxWorkerId + 1 && refusal === undefined; i++) {
        try {
          got.push((await acquire(i, maxWorkerId)).workerId);
        } catch (err) {
          refusal = err;
        }
      }
      expect(refusal).toMatchObject({ code: 'WORKER_ID_UNAVAILABLE' });
      expectNoDuplicates(got);
      for (const id of got) expect(id).toBeLessThanOrEqual(maxWorkerId);
    });

    it('closing a lease twice is harmless', async () => {
      const lease = await acquire(0);
      await lease.close();
      await expect(lease.close()).resolves.toBeUndefined();
    });
  });
}

/**
 * The reclamation rules, for every provider that reclaims ids (ZooKeeper, Postgres, Redis):
 * an id is taken again only when its holder's lease is gone, a holder that cannot renew stops
 * approving before its lease could expire, and a new holder approves nothing at or below what
 * any earlier holder of the id approved.
 */
export function reclamationContract(name: string, createHarness: () => Promise<ReclaimingHarness>): void {
  describe(`WorkerIdProvider reclamation contract: ${name}`, () => {
    let h: ReclaimingHarness;
    const leases: WorkerIdLease[] = [];
    const proxies: Array<{ close(): Promise<void> }> = [];
    const acquire = async (i: number, maxWorkerId: number, options: ProviderOptions = {}) => {
      const lease = (await h.provider(i, options).acquire({ maxWorkerId })) as LeasedWorkerIdLease;
      leases.push(lease);
      return lease;
    };
    /** A provider whose connection to the registry goes through a proxy; `cut()` partitions it (or, with no more approvals, crashes it). */
    const behindProxy = async () => {
      const port = await freePort();
      const proxy = await startProxy(port, h.target);
      proxies.push(proxy);
      return { port, cut: () => proxy.close() };
    };
    /** Approves now and returns the timestamp, or undefined when the lease refuses. */
    const approve = (lease: WorkerIdLease, ms = Date.now()): number | undefined => {
      try {
        lease.assertIssuable(ms);
        return ms;
      } catch {
        return undefined;
      }
    };

    beforeEach(async () => {
      h = await createHarness();
    });
    afterEach(async () => {
      await Promise.all(proxies.splice(0).map((p) => p.close()));
      await Promise.all(leases.splice(0).map((l) => l.close()));
      await h.close();
    });

    it('a closed id is taken again: 3 × 4 starts with new addresses on a 2-bit space, each above what the id approved before', async () => {
      const lastApproved = new Map<number, number>();
      for (let i = 0; i < 12; i++) {
        const lease = await acquire(100 + i, 3);
        const before = lastApproved.get(lease.workerId);
        if (before !== undefined) expect(lease.floorMs, `start ${i}, worker ${lease.workerId}`).toBeGreaterThanOrEqual(before);
        expect(approve(lease, lease.floorMs)).toBeUndefined();
        const now = await waitPast(lease.floorMs);
        expect(approve(lease, now)).toBe(now);
        lastApproved.set(lease.workerId, now);
        await lease.close();
      }
      expect(lastApproved.size).toBeLessThanOrEqual(4);
    });

    it('two live holders never share an id: 12 concurrent starts on a 3-bit space, 8 served with distinct ids, 4 refused', async () => {
      const outcomes = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => acquire(200 + i, 7)));
      const served = outcomes.flatMap((o) => (o.status === 'fulfilled' ? [o.value.workerId] : []));
      const refused = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason as { code?: string }] : []));
      expectNoDuplicates(served, 'worker ids');
      expect(served).toHaveLength(8);
      expect(refused.map((e) => e.code)).toEqual(['WORKER_ID_UNAVAILABLE', 'WORKER_ID_UNAVAILABLE', 'WORKER_ID_UNAVAILABLE', 'WORKER_ID_UNAVAILABLE']);
      // One closes: its id is free for the next start.
      const first = leases.find((l) => l.workerId === served[0])!;
      await first.close();
      expect((await acquire(300, 7)).workerId).toBe(first.workerId);
    });

    it('a holder cut off from the registry stops before its lease could expire; its id is taken only after that, above its confirmed mark', async () => {
      const link = await behindProxy();
      const a = await acquire(1, 0, { via: link.port });
      expect(approve(a)).toBeDefined();
      await link.cut();
      const confirmed = a.confirmedMs;
      let lastApprovedAt = Date.now();
      let b: LeasedWorkerIdLease | undefined;
      const started = Date.now();
      // The holder keeps trying to approve; another process keeps trying to start on the 1-id space.
      // Each attempt begins with the holder's answer: the attempt that takes the id must find it stopped.
      let refusedBeforeTake = false;
      for (let nextTry = 0; !b; await sleep(25)) {
        if (approve(a) !== undefined) lastApprovedAt = Date.now();
        if (Date.now() >= nextTry) {
          nextTry = Date.now() + 200;
          refusedBeforeTake = approve(a) === undefined;
          b = await acquire(2, 0).catch((err: { code?: string }) => {
            expect(err.code).toBe('WORKER_ID_UNAVAILABLE');
            return undefined;
          });
        }
        expect(Date.now() - started, 'the id was never taken').toBeLessThan(h.leaseMs * 4 + 10_000);
      }
      const takenAt = Date.now();
      expect(b.workerId).toBe(a.workerId);
      expect(refusedBeforeTake, 'the cut-off holder still approved when its id was taken').toBe(true);
      expect(lastApprovedAt).toBeLessThan(takenAt);
      // The lease outlives the last renewal sent before the cut by `leaseMs`.
      expect(takenAt - started, 'the id was taken before the lease could have expired').toBeGreaterThanOrEqual(h.leaseMs - h.renewEveryMs - 100);
      expect(b.floorMs).toBeGreaterThanOrEqual(confirmed);
      expect(approve(b, confirmed)).toBeUndefined();
      expect(approve(a)).toBeUndefined();
    });

    it("a restart in the same data directory takes its dead predecessor's lease over at once, above what it approved", async () => {
      const dataDir = tempDir();
      const link = await behindProxy();
      const a = await acquire(3, 1023, { dataDir, via: link.port });
      const approved = approve(a, Date.now() + 300)!;
      expect(approved).toBeDefined();
      await link.cut(); // and it approves nothing more: a crash, as far as the registry can tell
      const started = Date.now();
      const b = await acquire(3, 1023, { dataDir });
      expect(b.workerId).toBe(a.workerId);
      expect(Date.now() - started).toBeLessThan(h.leaseMs);
      expect(b.floorMs).toBeGreaterThanOrEqual(approved);
      expect(approve(b, approved)).toBeUndefined();
    });

    it('a preferred id: held under the same identity, a start waits for that lease and takes it above the old mark; another identity takes another id', async () => {
      const link = await behindProxy();
      const a = await acquire(7, 15, { preferredWorkerId: 2, via: link.port });
      expect(a.workerId).toBe(2);
      const other = await acquire(8, 15, { preferredWorkerId: 2 });
      expect(other.workerId).not.toBe(2);
      let b: LeasedWorkerIdLease | undefined;
      const waiting = acquire(7, 15, { preferredWorkerId: 2, dataDir: tempDir() }).then((l) => (b = l));
      await sleep(500);
      expect(b, 'the replacement took the id while its holder was alive').toBeUndefined();
      expect(approve(a)).toBeDefined();
      await link.cut(); // the replaced pod, still alive, loses the registry
      const confirmed = a.confirmedMs;
      let lastApprovedAt = Date.now();
      await until(
        'the replacement to take the preferred id',
        () => {
          if (approve(a) !== undefined) lastApprovedAt = Date.now();
          return b !== undefined;
        },
        { intervalMs: 25, timeoutMs: h.leaseMs * 4 + 10_000 },
      );
      await waiting;
      expect(b!.workerId).toBe(2);
      expect(lastApprovedAt).toBeLessThan(Date.now());
      expect(b!.floorMs).toBeGreaterThanOrEqual(confirmed);
    });
  });
}

/** Waits until the wall clock is past `ms`; returns the time then. */
async function waitPast(ms: number): Promise<number> {
  for (;;) {
    const now = Date.now();
    if (now > ms) return now;
    await sleep(Math.min(ms - now + 1, 50));
  }
}
