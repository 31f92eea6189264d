import { readFileSync } from 'node:fs';
import { IdmintError } from '../core/errors.js';
import type { Clock } from '../core/ports.js';

/**
 * Hooks the project's own tests and chaos runs use to inject faults, read from the environment by
 * name. They are not configuration: outside the schema users read (src/app/config.ts, README's
 * table), never set in production.
 * - `IDMINT_TEST_CLOCK_FILE`: this process's clock is shifted by the milliseconds in that file (`fileClock`).
 * - `IDMINT_REFILL_PAUSE_AFTER_ALLOCATE_MS`: the refill waits this long between taking a segment
 *   and pushing it (crash tests kill it in between).
 */
export interface TestHooks {
  clockFile: string | undefined;
  pauseAfterAllocateMs: number;
}

export function testHooks(env: NodeJS.ProcessEnv = process.env): TestHooks {
  const pause = env.IDMINT_REFILL_PAUSE_AFTER_ALLOCATE_MS?.trim() || '0';
  const pauseAfterAllocateMs = Number(pause);
  if (!Number.isSafeInteger(pauseAfterAllocateMs) || pauseAfterAllocateMs < 0) {
    throw new IdmintError(
      'BAD_REQUEST',
      `IDMINT_REFILL_PAUSE_AFTER_ALLOCATE_MS (a test hook) must be a whole number of milliseconds, got "${pause}"; unset it outside tests`,
    );
  }
  return { clockFile: env.IDMINT_TEST_CLOCK_FILE?.trim() || undefined, pauseAfterAllocateMs };
}

/**
 * IDMINT_TEST_CLOCK_FILE, a test hook: this process's clock is the system clock plus the
 * milliseconds written in the file (re-read every 50 ms; missing or unreadable means 0). The
 * chaos harness steps one worker's clock back with it, never the machine's. Everything that
 * reads time for IDs — the Snowflake generator, the clock mark, the worker-id lease — uses it.
 */
export function fileClock(path: string): Clock {
  const read = (): number => {
    try {
      const n = Number(readFileSync(path, 'utf8').trim());
      return Number.isSafeInteger(n) ? n : 0;
    } catch {
      return 0;
    }
  };
  let offset = read();
  setInterval(() => (offset = read()), 50).unref();
  return { now: () => Date.now() + offset };
}
