import { ConfigError, IdmintError } from '../core/errors.js';
import type { WorkerIdLease } from '../core/ports.js';
import type { LocalTimeMark } from './local-time-mark.js';

/** Checks an id against the layout's range; the message says where it came from. */
export function checkWorkerIdRange(workerId: number, maxWorkerId: number, where: string): void {
  if (!Number.isSafeInteger(maxWorkerId) || maxWorkerId < 0) {
    throw new ConfigError(`the layout's maxWorkerId must be a non-negative integer, got ${maxWorkerId}`, 'maxWorkerId');
  }
  if (!Number.isSafeInteger(workerId) || workerId < 0 || workerId > maxWorkerId) {
    throw new IdmintError(
      'WORKER_ID_UNAVAILABLE',
      `worker id ${workerId} from ${where} does not fit the layout (0..${maxWorkerId}); the worker-id space is exhausted or misconfigured`,
      {
        details: { workerId, maxWorkerId, where },
      },
    );
  }
}

/** A lease with an optional local mark and a close hook; the shape every provider here returns. */
export class SimpleLease implements WorkerIdLease {
  readonly workerId: number;
  readonly provider: string;
  private readonly mark: LocalTimeMark | null;
  private readonly onClose: (() => Promise<void> | void) | undefined;
  private closing: Promise<void> | null = null;

  constructor(workerId: number, provider: string, mark: LocalTimeMark | null, onClose?: () => Promise<void> | void) {
    this.workerId = workerId;
    this.provider = provider;
    this.mark = mark;
    this.onClose = onClose;
  }

  assertIssuable(timestampMs: number): void {
    if (this.closing) throw new IdmintError('NOT_READY', `the worker-id lease (${this.provider} ${this.workerId}) is closed`);
    this.mark?.assertIssuable(timestampMs);
  }

  close(): Promise<void> {
    this.closing ??= Promise.resolve(this.onClose?.()).then(() => undefined);
    return this.closing;
  }
}
