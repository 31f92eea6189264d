/**
 * The one way tests wait. `until` polls a condition with a deadline and says what it waited for;
 * `sleep` is only for letting time pass where that is the point of the test (a window that must
 * elapse, load that must run for a while), never for waiting on a condition.
 */

export interface UntilOptions {
  /** Default 60,000 ms: generous for a loaded 2-core machine; a passing test never waits it out. */
  timeoutMs?: number;
  /** Default 50 ms. */
  intervalMs?: number;
  /** Appended to the failure message (a server's output, the last value seen). */
  detail?: () => string;
}

/** Polls `check` until it returns true; fails after `timeoutMs` naming `what`. */
export async function until(what: string, check: () => boolean | Promise<boolean>, options: UntilOptions = {}): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) {
      const detail = options.detail?.();
      throw new Error(`timed out waiting for ${what}${detail ? `\n${detail}` : ''}`);
    }
    await sleep(options.intervalMs ?? 50);
  }
}

/** Polls `probe` until `ok(value)`; returns that value. */
export async function untilValue<T>(what: string, probe: () => T | Promise<T>, ok: (value: T) => boolean, options: UntilOptions = {}): Promise<T> {
  let last: T | undefined;
  await until(
    what,
    async () => {
      last = await probe();
      return ok(last);
    },
    {
      ...options,
      detail: () =>
        [options.detail?.(), `last value: ${JSON.stringify(last, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))}`].filter(Boolean).join('\n'),
    },
  );
  return last as T;
}

/** Lets time pass. Not for waiting on a condition: use `until`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
