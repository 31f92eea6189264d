import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { open, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ClockBackwardsError, IdmintError } from '../core/errors.js';
import { systemClock, type Clock } from '../core/ports.js';
import { sleep } from '../core/retry.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { checkInteger, defaults, resolveOptions } from '../core/options.js';

/** What the local file holds: the worker id last used under this key and the time high-water mark. */
export interface LocalMarkState {
  readonly version: 1;
  readonly workerId: number;
  /** No ID with a timestamp above this (epoch ms) has been or will be issued before the file is rewritten. */
  readonly markMs: number;
  /** Which provider wrote it, e.g. `zookeeper`, `redis`, `file`, `static`. */
  readonly source: string;
  readonly updatedAt: string;
}

export interface LocalTimeMarkOptions {
  dataDir: string;
  /** Names the file: one file per provider identity (e.g. `zk-10.0.0.1:8080`). */
  key: string;
  clock?: Clock;
  logger?: Logger;
  /** How far ahead of issuing the mark is persisted. Default 1000 ms: one fsync'd write per second of issuing. */
  markAheadMs?: number;
  /**
   * At start, a clock behind the mark by at most this much is waited out (a quick restart always
   * lands up to `markAheadMs` behind it); further behind refuses. Default 1500 ms.
   */
  maxStartWaitMs?: number;
}

export const LOCAL_TIME_MARK_DEFAULTS = defaults({ markAheadMs: 1000, maxStartWaitMs: 1500 });

/** The file for `key` under `dataDir`; the key is sanitised so any address is a safe file name. */
export function localMarkPath(dataDir: string, key: string): string {
  return join(dataDir, `worker-id.${key.replace(/[^A-Za-z0-9._-]/g, '_')}.json`);
}

/** Reads the state, or null when there is no file. A corrupt file refuses: guessing could repeat IDs. */
export function readLocalMark(path: string): LocalMarkState | null {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new IdmintError('WORKER_ID_UNAVAILABLE', `cannot read the worker-id file ${path}: ${(err as Error).message}`, { cause: err });
  }
  try {
    const s = JSON.parse(text) as Partial<LocalMarkState>;
    if (s.version === 1 && Number.isSafeInteger(s.workerId) && Number.isSafeInteger(s.markMs) && typeof s.source === 'string') {
      return s as LocalMarkState;
    }
  } catch {
    // falls through to the refusal below
  }
  throw new IdmintError('WORKER_ID_UNAVAILABLE', `the worker-id file ${path} is corrupt; inspect it, then delete it to start afresh`, { details: { path } });
}

/** Durable replace: write a temp file, fsync it, rename over the old one, fsync the directory. */
export function writeLocalMarkSync(path: string, state: LocalMarkState): void {
  writeJsonDurablySync(path, state);
}

/** The durable replace of any small JSON file (the mark, the worker-id lease file). */
export function writeJsonDurablySync(path: string, value: unknown): void {
  const dir = join(path, '..');
  mkdirSync(dir, { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  const fd = openSync(tmp, 'w');
  try {
    writeSync(fd, JSON.stringify(value) + '\n');
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  fsyncDirSync(dir);
}

function fsyncDirSync(dir: string): void {
  try {
    const dfd = openSync(dir, 'r');
    try {
      fsyncSync(dfd);
    } finally {
      closeSync(dfd);
    }
  } catch {
    // Some filesystems refuse fsync on a directory; the rename is still atomic there.
  }
}

/**
 * The local safety net. Holds the worker id and a time high-water mark that is always persisted
 * *before* an ID with a later timestamp is issued, so a restart with the clock stepped back
 * (by less than ZooKeeper's 3 s report could catch) cannot repeat IDs.
 */
export class LocalTimeMark {
  readonly path: string;
  readonly workerId: number;
  readonly source: string;
  private readonly options: Readonly<Required<Omit<LocalTimeMarkOptions, 'logger'>>>;
  private readonly logger: Logger;
  private mark: number;
  /** The highest mark renamed into place (durable or about to be): renames only ever raise it. */
  private written: number;
  private renewing = false;

  private constructor(path: string, workerId: number, source: string, markMs: number, options: Required<Omit<LocalTimeMarkOptions, 'logger'>>, logger: Logger) {
    this.path = path;
    this.workerId = workerId;
    this.source = source;
    this.mark = markMs;
    this.written = markMs;
    this.options = Object.freeze(options);
    this.logger = logger;
  }

  /**
   * Checks the clock against the previous mark (waits out a small gap, refuses a larger one with
   * CLOCK_BACKWARDS naming both times), then persists `workerId` with a fresh mark.
   */
  static async start(options: LocalTimeMarkOptions & { workerId: number; source: string; previous?: LocalMarkState | null }): Promise<LocalTimeMark> {
    const { dataDir, key, clock, markAheadMs, maxStartWaitMs } = options;
    const merged = resolveOptions({ ...LOCAL_TIME_MARK_DEFAULTS, clock: systemClock }, { dataDir, key, clock, markAheadMs, maxStartWaitMs }, (s) => {
      checkInteger('LocalTimeMark', s, 'markAheadMs', 1);
      checkInteger('LocalTimeMark', s, 'maxStartWaitMs', 0);
    });
    const logger = (options.logger ?? silentLogger).child({ component: 'local-time-mark' });
    const path = localMarkPath(merged.dataDir, merged.key);
    const previous = options.previous === undefined ? readLocalMark(path) : options.previous;
    let now = merged.clock.now();
    if (previous && now <= previous.markMs) {
      const refuse = (nowMs: number) =>
        new ClockBackwardsError(
          previous.markMs,
          nowMs,
          `clock is ${previous.markMs - nowMs} ms behind the local high-water mark in ${path} (mark ${iso(previous.markMs)}, now ${iso(nowMs)}); refusing to start: IDs up to the mark may already exist`,
        );
      if (previous.markMs - now > merged.maxStartWaitMs) throw refuse(now);
      logger.info({ markMs: previous.markMs, nowMs: now }, 'clock is just behind the local mark (quick restart); waiting it out');
      while (now <= previous.markMs) {
        await sleep(Math.min(previous.markMs - now + 1, 50));
        const next = merged.clock.now();
        // A clock that moves further back while we wait is a real step, not a restart.
        if (previous.markMs - next > merged.maxStartWaitMs) throw refuse(next);
        now = next;
      }
    }
    const lt = new LocalTimeMark(path, options.workerId, options.source, now + merged.markAheadMs, merged, logger);
    lt.persist();
    return lt;
  }

  /** Epoch ms up to which IDs may be issued without touching the disk. */
  get markMs(): number {
    return this.mark;
  }

  /**
   * Call before handing out an ID whose timestamp is `timestampMs`. Cheap below the mark; at or
   * past it, persists a new mark synchronously first. Throws NOT_READY if the write fails.
   */
  assertIssuable(timestampMs: number): void {
    if (timestampMs <= this.mark) {
      // Halfway to the mark, the next one is written in the background, off the event loop: a
      // steady issuer never waits for an fsync. The mark only moves once that write is durable.
      if (!this.renewing && timestampMs > this.mark - this.options.markAheadMs / 2) this.renew();
      return;
    }
    // Never below a mark already renamed into place by a background write: the file never goes down.
    const next = Math.max(Math.max(timestampMs, this.options.clock.now()) + this.options.markAheadMs, this.written);
    const previous = this.mark;
    this.mark = next;
    try {
      this.persist();
    } catch (err) {
      this.mark = previous;
      throw new IdmintError('NOT_READY', `cannot persist the clock high-water mark to ${this.path}: ${(err as Error).message}`, { cause: err });
    }
  }

  private state(markMs: number): LocalMarkState {
    return { version: 1, workerId: this.workerId, markMs, source: this.source, updatedAt: new Date().toISOString() };
  }

  private persist(): void {
    writeLocalMarkSync(this.path, this.state(this.mark));
    this.written = Math.max(this.written, this.mark);
    this.logger.trace({ markMs: this.mark }, 'mark persisted');
  }

  /**
   * The background write: temp file written and fsynced on the thread pool; then, on this
   * thread, renamed into place only if no higher mark was written meanwhile (so the file never
   * goes down), the directory fsynced, and only then the mark raised. A failure leaves the mark
   * where it was: the synchronous path at the mark writes again or refuses.
   */
  private renew(): void {
    const next = this.options.clock.now() + this.options.markAheadMs;
    if (next <= this.mark) return;
    this.renewing = true;
    const tmp = `${this.path}.${process.pid}.renew.tmp`;
    const write = async (): Promise<void> => {
      const handle = await open(tmp, 'w');
      try {
        await handle.writeFile(JSON.stringify(this.state(next)) + '\n');
        await handle.sync();
      } finally {
        await handle.close();
      }
      if (next <= this.written) return void (await rm(tmp, { force: true }));
      renameSync(tmp, this.path);
      this.written = next;
      const dir = await open(join(this.path, '..'), 'r').catch(() => undefined);
      await dir?.sync().catch(() => undefined); // some filesystems refuse fsync on a directory
      await dir?.close();
      this.mark = Math.max(this.mark, next);
    };
    write()
      .catch((err: unknown) =>
        this.logger.warn({ err, path: this.path }, 'background write of the clock mark failed; the next ID past the mark writes it synchronously'),
      )
      .finally(() => (this.renewing = false));
  }
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
