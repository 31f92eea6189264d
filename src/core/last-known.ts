import { TimeoutError } from './errors.js';

/** `promise`, or a TimeoutError naming `what` once `ms` have passed (the promise itself runs on). */
export function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(what, ms)), ms);
    timer.unref?.();
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** A read that may have failed: the value as last read, when, and why it is not fresh. */
export interface KnownValue<T> {
  /** The value read now, or as last read; undefined when it was never read. */
  readonly value: T | undefined;
  /** When the value was read (epoch ms); undefined when it never was. */
  readonly at: number | undefined;
  /** Why it could not be read now: the value (if any) is the last one read. */
  readonly error?: string;
}

/**
 * The last value a read returned, for pages that must answer while the server behind the read is
 * down (an operator's page shows what was last known and says since when, never nothing). Reads
 * are bounded by `timeoutMs`: a server that hangs costs a page that long, not a minute.
 */
export class LastKnown<T> {
  private value: T | undefined;
  private at: number | undefined;
  private pending: Promise<KnownValue<T>> | undefined;

  constructor(
    private readonly read: () => Promise<T>,
    private readonly options: { what: string; timeoutMs: number; now?: () => number },
  ) {}

  /** Reads now (callers at the same moment share one read); on failure answers the last value with the error. Never throws. */
  get(): Promise<KnownValue<T>> {
    this.pending ??= this.readNow().finally(() => (this.pending = undefined));
    return this.pending;
  }

  private async readNow(): Promise<KnownValue<T>> {
    const now = this.options.now ?? Date.now;
    try {
      this.value = await withDeadline(this.read(), this.options.timeoutMs, this.options.what);
      this.at = now();
      return { value: this.value, at: this.at };
    } catch (err) {
      return { value: this.value, at: this.at, error: (err as Error).message };
    }
  }

  /** The last value read, without reading (undefined before the first successful read). */
  peek(): T | undefined {
    return this.value;
  }
}
