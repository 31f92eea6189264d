import { IdmintError } from '../core/errors.js';
import type { WorkerIdLease, WorkerIdProvider } from '../core/ports.js';

/**
 * A provider whose leases issue nothing while `refusal()` names a reason: the deployment record
 * says this process's worker ids are not the deployment's (another registry, layout or region
 * split), so its IDs could coincide with another process's. Checked at every issue: a difference
 * found while the process runs stops it from the next ID on.
 */
export class GuardedWorkerIdProvider implements WorkerIdProvider {
  constructor(
    private readonly inner: WorkerIdProvider,
    private readonly refusal: () => string | undefined,
  ) {}

  async acquire(options: { maxWorkerId: number }): Promise<WorkerIdLease> {
    const lease = await this.inner.acquire(options);
    const refusal = this.refusal;
    return {
      workerId: lease.workerId,
      provider: lease.provider,
      assertIssuable(timestampMs) {
        const reason = refusal();
        if (reason !== undefined) throw new IdmintError('NOT_READY', reason);
        lease.assertIssuable(timestampMs);
      },
      ...(lease.health ? { health: () => lease.health!() } : {}),
      close: () => lease.close(),
    };
  }
}
