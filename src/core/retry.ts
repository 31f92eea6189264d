import { sleepBy, systemClock, type Clock } from './ports.js';

/** When and how long to try again: doubling waits from `initialMs` up to `maxMs`, until `timeoutMs` has passed. */
export interface RetryPolicy {
  /** Which failures may pass on a second try; any other is thrown at once. */
  retriable: (err: unknown) => boolean;
  /** Give up (throw the last failure) once this long has passed since the first try. */
  timeoutMs: number;
  /** First wait. Default 100 ms. */
  initialMs?: number;
  /** Longest wait. Default 1000 ms. */
  maxMs?: number;
}

/**
 * The one retrier: runs `attempt` until it succeeds, a failure is not retriable, or the policy's
 * time is up. Waits by `clock`, so a test's clock runs it without real time passing.
 */
export async function retry<T>(attempt: () => Promise<T>, policy: RetryPolicy, clock: Clock = systemClock): Promise<T> {
  const deadline = clock.now() + policy.timeoutMs;
  for (let wait = policy.initialMs ?? 100; ; wait = Math.min(wait * 2, policy.maxMs ?? 1000)) {
    try {
      return await attempt();
    } catch (err) {
      if (!policy.retriable(err) || clock.now() + wait > deadline) throw err;
    }
    await sleepBy(clock, wait);
  }
}
