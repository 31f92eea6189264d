import type { Clock, WorkerIdLease, WorkerIdProvider } from '../core/ports.js';
import type { Logger } from '../core/logger.js';
import { checkWorkerIdRange, SimpleLease } from './lease.js';
import { checkInteger, defaults, OptionsError, resolveOptions } from '../core/options.js';
import { LocalTimeMark, localMarkPath, readLocalMark } from './local-time-mark.js';

export interface FileWorkerIdProviderOptions {
  /** Directory of the worker-id file (IDMINT_DATA_DIR). */
  dataDir: string;
  /** Names the file, so several identities can share a data dir. Default `local`. */
  key?: string;
  /** The id written when the file does not exist yet; the file's id wins afterwards. Default 0. */
  workerId?: number;
  clock?: Clock;
  logger?: Logger;
  /** See LocalTimeMarkOptions. */
  markAheadMs?: number;
  maxStartWaitMs?: number;
}

export const FILE_WORKER_ID_DEFAULTS = defaults({ key: 'local', workerId: 0 });

/** The embedded default: the worker id lives in a file under the data dir, next to its clock mark. */
export class FileWorkerIdProvider implements WorkerIdProvider {
  readonly options: Readonly<FileWorkerIdProviderOptions & { key: string; workerId: number }>;

  constructor(options: FileWorkerIdProviderOptions) {
    this.options = resolveOptions<typeof FILE_WORKER_ID_DEFAULTS, FileWorkerIdProviderOptions>(FILE_WORKER_ID_DEFAULTS, options, (s) => {
      if (typeof s.dataDir !== 'string' || s.dataDir === '')
        throw new OptionsError('FileWorkerIdProvider', 'dataDir', 'is required: the directory that keeps the worker id and its clock mark (IDMINT_DATA_DIR)');
      checkInteger('FileWorkerIdProvider', s, 'workerId', 0);
    });
  }

  async acquire({ maxWorkerId }: { maxWorkerId: number }): Promise<WorkerIdLease> {
    const path = localMarkPath(this.options.dataDir, this.options.key);
    const previous = readLocalMark(path);
    const workerId = previous?.workerId ?? this.options.workerId;
    checkWorkerIdRange(workerId, maxWorkerId, previous ? `the file ${path}` : 'the configured initial id');
    const mark = await LocalTimeMark.start({ ...this.options, workerId, source: 'file', previous });
    return new SimpleLease(workerId, 'file', mark);
  }
}
