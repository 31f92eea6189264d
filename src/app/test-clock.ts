import { readFileSync } from 'node:fs';
import type { Clock } from '../core/ports.js';

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
