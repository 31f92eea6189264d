import { systemClock, type Clock } from './ports.js';

/**
 * The one retrier and the one sleep (as KafkaJS keeps its retrier in one module): every wait in
 * `src` goes through here, so a test's Clock runs a retry or a poll without real time passing.
 */

/** How long to wait before the next try. */
export interface Backoff {
  /** Wait before the second try. Default 100 ms. */
  initialMs?: number;
  /** `exponential`: `initialMs × factor^n`; `linear`: `initialMs × (n + 1)`. Default exponential. */
  growth?: 'exponential' | 'linear';
  /** Growth per exponential step (1: a fixed wait). Default 2. */
  factor?: number;
  /** Longest wait. Default 1000 ms. */
  maxMs?: number;
  /** Share of each wait drawn at random, 0 to 1: the wait lies in `[(1 - jitter) × d, d]`. Default 0. */
  jitter?: number;
}

/** The wait after the `n`th failed try (0 for the first), by `backoff`; `random` returns [0, 1). */
export function backoffMs(n: number, backoff: Backoff = {}, random: () => number = Math.random): number {
  const initial = backoff.initialMs ?? 100;
  const grown = backoff.growth === 'linear' ? initial * (n + 1) : initial * (backoff.factor ?? 2) ** n;
  const capped = Math.min(grown, backoff.maxMs ?? 1000);
  const jitter = Math.min(Math.max(backoff.jitter ?? 0, 0), 1);
  return jitter === 0 ? capped : capped * (1 - jitter * random());
}

export interface SleepOptions {
  /** Ends the wait at once, rejecting with the signal's reason. */
  signal?: AbortSignal;
  /** Waits by this clock's `sleep` when it has one (a test's clock steps its time). Default a real timer. */
  clock?: Clock;
  /** A real timer that does not keep the process alive. Default false. */
  unref?: boolean;
}

/** Waits `ms`; rejects with `signal.reason` as soon as the signal aborts (at once if it already has). */
export function sleep(ms: number, options: SleepOptions = {}): Promise<void> {
  const { signal, clock, unref } = options;
  if (signal?.aborted) return Promise.reject(signal.reason as Error);
  if (clock?.sleep) {
    const waited = clock.sleep(Math.max(0, ms));
    if (!signal) return waited;
    return new Promise<void>((resolve, reject) => {
      const abort = () => reject(signal.reason as Error);
      signal.addEventListener('abort', abort, { once: true });
      waited.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort));
    });
  }
  if (ms <= 0) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const abort = () => {
      clearTimeout(timer);
      reject(signal!.reason as Error);
    };
    const timer = setTimeout(
      () => {
        signal?.removeEventListener('abort', abort);
        resolve();
      },
      Math.max(0, ms),
    );
    if (unref) timer.unref();
    signal?.addEventListener('abort', abort, { once: true });
  });
}

/** A failed try that will be tried again: what a site logs or counts. */
export interface RetryEvent {
  /** What is retried (the option `what`). */
  what: string;
  err: unknown;
  /** Tries so far, 1 after the first. */
  attempt: number;
  /** The wait before the next try. */
  waitMs: number;
}

export interface RetryOptions extends Backoff {
  /** What is retried, for logs (passed to onRetry): `"reading the offsets of idmint.pool.order"`. */
  what: string;
  /** Which failures may pass on another try; any other is thrown at once. */
  retriable: (err: unknown) => boolean;
  /** Tries at most, the first included (one is always made). Default unlimited. */
  attempts?: number;
  /**
   * Give up (throw the last failure) once this long has passed since the first try; the last wait
   * is cut to end at the deadline, where one more try is made. Default none.
   */
  timeoutMs?: number;
  /** Stops at once: before a try or during a wait, rejecting with the signal's reason. */
  signal?: AbortSignal;
  /** The deadline's time and the waits (a test's clock steps them). Default the system clock. */
  clock?: Clock;
  /** For the jitter, [0, 1). Default Math.random. */
  random?: () => number;
  /** Real timers that do not keep the process alive. Default false. */
  unref?: boolean;
  /** Called after a failure that will be retried, before the wait (awaited). */
  onRetry?: (event: RetryEvent) => void | Promise<void>;
}

/**
 * Runs `attempt` (given the tries so far, 0 for the first) until it succeeds, a failure is not
 * retriable, the tries or the time are used up (the last failure is thrown), or `signal` aborts.
 */
export async function retry<T>(attempt: (n: number) => Promise<T>, options: RetryOptions): Promise<T> {
  const clock = options.clock ?? systemClock;
  const deadline = options.timeoutMs === undefined ? Infinity : clock.now() + options.timeoutMs;
  const attempts = options.attempts ?? Infinity;
  for (let n = 0; ; n++) {
    if (options.signal?.aborted) throw options.signal.reason;
    try {
      return await attempt(n);
    } catch (err) {
      const left = deadline - clock.now();
      if (!options.retriable(err) || n + 1 >= attempts || left <= 0 || options.signal?.aborted) throw err;
      const waitMs = Math.min(backoffMs(n, options, options.random), left);
      await options.onRetry?.({ what: options.what, err, attempt: n + 1, waitMs });
      await sleep(waitMs, { clock, ...(options.signal ? { signal: options.signal } : {}), ...(options.unref ? { unref: true } : {}) });
    }
  }
}
