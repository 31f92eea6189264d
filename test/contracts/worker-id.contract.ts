import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { WorkerIdLease, WorkerIdProvider } from '../../src/core/ports.js';
import { expectNoDuplicates } from '../support/unique.js';

/**
 * One contract for every WorkerIdProvider (CosId's MachineIdDistributorSpec). A harness is one
 * isolated namespace (ZooKeeper root, Redis prefix, Postgres schema, data dirs) on a real server.
 */
export interface ProviderHarness {
  /** A provider for the process at address number `i`; equal `i` means the same ip:port restarted. */
  provider(i: number): WorkerIdProvider;
  close(): Promise<void>;
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
