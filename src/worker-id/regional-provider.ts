import { IdmintError } from '../core/errors.js';
import type { WorkerIdLease, WorkerIdProvider } from '../core/ports.js';
import { regionalWorkerIds, type RegionLayout } from '../core/region.js';

/**
 * One region of several: the worker id's high bits name the region (core/region.ts), and the
 * provider underneath (ZooKeeper, Postgres, Redis, the file, IDMINT_WORKER_ID) numbers the workers
 * inside it. Two regions never hand out the same worker id, whatever their registries say.
 */
export class RegionalWorkerIdProvider implements WorkerIdProvider {
  constructor(
    private readonly inner: WorkerIdProvider,
    private readonly layout: Pick<RegionLayout, 'regions' | 'region'>,
  ) {}

  async acquire({ maxWorkerId }: { maxWorkerId: number }): Promise<WorkerIdLease> {
    let ids: ReturnType<typeof regionalWorkerIds>;
    try {
      ids = regionalWorkerIds(this.layout, maxWorkerId);
    } catch (err) {
      throw new IdmintError('WORKER_ID_UNAVAILABLE', (err as Error).message);
    }
    const lease = await this.inner.acquire({ maxWorkerId: ids.maxLocal });
    const workerId = ids.workerId(lease.workerId);
    return {
      workerId,
      provider: lease.provider,
      assertIssuable: (timestampMs) => lease.assertIssuable(timestampMs),
      ...(lease.health ? { health: () => lease.health!() } : {}),
      close: () => lease.close(),
    };
  }
}
