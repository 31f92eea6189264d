import { checkInteger } from '../core/options.js';
import type { Clock, WorkerIdLease, WorkerIdProvider } from '../core/ports.js';
import type { Logger } from '../core/logger.js';
import { checkWorkerIdRange, SimpleLease } from './lease.js';
import { LocalTimeMark } from './local-time-mark.js';

export interface StaticWorkerIdProviderOptions {
  /** When set, a local clock mark is kept there (recommended: a static id is reused across restarts). */
  dataDir?: string;
  clock?: Clock;
  logger?: Logger;
  markAheadMs?: number;
  maxStartWaitMs?: number;
}

/** A worker id from configuration (IDMINT_WORKER_ID); the operator guarantees it is unique. */
export class StaticWorkerIdProvider implements WorkerIdProvider {
  readonly workerId: number;
  readonly options: Readonly<StaticWorkerIdProviderOptions>;

  constructor(workerId: number, options: StaticWorkerIdProviderOptions = {}) {
    checkInteger('StaticWorkerIdProvider (IDMINT_WORKER_ID)', { workerId }, 'workerId', 0);
    this.workerId = workerId;
    this.options = Object.freeze({ ...options });
  }

  async acquire({ maxWorkerId }: { maxWorkerId: number }): Promise<WorkerIdLease> {
    checkWorkerIdRange(this.workerId, maxWorkerId, 'static configuration (IDMINT_WORKER_ID)');
    const { dataDir } = this.options;
    const mark =
      dataDir === undefined ? null : await LocalTimeMark.start({ ...this.options, dataDir, key: 'static', workerId: this.workerId, source: 'static' });
    return new SimpleLease(this.workerId, 'static', mark);
  }
}
