import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { backoffMs, retry, sleep, type RetryEvent } from '../../../src/core/retry.js';
import { SteppingClock } from './helpers.js';

const failing = (times: number, error: Error) => {
  let calls = 0;
  return async () => {
    if (++calls <= times) throw error;
    return calls;
  };
};

const always = () => true;

describe('backoffMs', () => {
  it('doubles from initialMs up to maxMs, or grows by initialMs when linear', () => {
    expect([0, 1, 2, 3, 4].map((n) => backoffMs(n, { initialMs: 100, maxMs: 500 }))).toEqual([100, 200, 400, 500, 500]);
    expect([0, 1, 2, 9, 10].map((n) => backoffMs(n, { initialMs: 200, growth: 'linear', maxMs: 2000 }))).toEqual([200, 400, 600, 2000, 2000]);
    expect([0, 5].map((n) => backoffMs(n, { initialMs: 5000, factor: 1, maxMs: 5000 }))).toEqual([5000, 5000]);
  });

  it('a jittered wait lies in [(1 - jitter) × d, d], d the wait without jitter', () => {
    fc.assert(
      fc.property(
        fc.nat(40),
        fc.integer({ min: 0, max: 10_000 }),
        fc.integer({ min: 0, max: 60_000 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (n, initialMs, maxMs, jitter, r) => {
          const d = backoffMs(n, { initialMs, maxMs });
          const wait = backoffMs(n, { initialMs, maxMs, jitter }, () => r);
          expect(d).toBeLessThanOrEqual(maxMs);
          expect(wait).toBeLessThanOrEqual(d);
          expect(wait).toBeGreaterThanOrEqual(d * (1 - jitter) - 1e-9);
        },
      ),
    );
  });
});

describe('retry', () => {
  it('asks again after doubling waits until the attempt succeeds', async () => {
    const clock = new SteppingClock(0);
    await expect(
      retry(failing(4, new Error('moving')), { what: 'test', retriable: always, timeoutMs: 10_000, initialMs: 100, maxMs: 500, clock }),
    ).resolves.toBe(5);
    expect(clock.waits).toEqual([100, 200, 400, 500]);
  });

  it('throws a failure that is not retriable at once, without a wait', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 20 }), async (attempts) => {
        const clock = new SteppingClock(0);
        let tries = 0;
        const attempt = async () => {
          tries++;
          throw new Error('final');
        };
        await expect(retry(attempt, { what: 'test', retriable: () => false, attempts, clock })).rejects.toThrow('final');
        expect(tries).toBe(1);
        expect(clock.waits).toEqual([]);
      }),
    );
  });

  it('never waits past the deadline, and tries once more at it before throwing the last failure', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 30_000 }),
        fc.integer({ min: 1, max: 5000 }),
        fc.integer({ min: 100, max: 5000 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        async (timeoutMs, initialMs, maxMs, jitter) => {
          const clock = new SteppingClock(1_000_000);
          const started = clock.ms;
          const tried: number[] = [];
          const attempt = async () => {
            tried.push(clock.ms);
            throw new Error(`try ${tried.length}`);
          };
          await expect(retry(attempt, { what: 'test', retriable: always, timeoutMs, initialMs, maxMs, jitter, clock })).rejects.toThrow('try');
          expect(clock.ms - started).toBe(timeoutMs);
          expect(tried.at(-1)).toBe(started + timeoutMs);
          expect(tried.every((at) => at <= started + timeoutMs)).toBe(true);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('stops after `attempts` tries, with one event per retry naming what is retried', async () => {
    const clock = new SteppingClock(0);
    const events: RetryEvent[] = [];
    await expect(
      retry(failing(10, new Error('down')), {
        what: 'asking the server',
        retriable: always,
        attempts: 3,
        initialMs: 50,
        clock,
        onRetry: (e) => void events.push(e),
      }),
    ).rejects.toThrow('down');
    expect(clock.waits).toEqual([50, 100]);
    expect(events.map((e) => [e.what, e.attempt, e.waitMs])).toEqual([
      ['asking the server', 1, 50],
      ['asking the server', 2, 100],
    ]);
  });

  it('an abort stops it at once: during a wait, and before a try', async () => {
    const stop = new AbortController();
    const clock = new SteppingClock(0);
    // A wait that never ends by itself: only the abort can end it.
    clock.sleep = (ms) => (clock.waits.push(ms), new Promise<void>(() => undefined));
    let tries = 0;
    const running = retry(
      async () => {
        tries++;
        throw new Error('down');
      },
      { what: 'test', retriable: always, initialMs: 60_000, maxMs: 60_000, clock, signal: stop.signal },
    );
    while (clock.waits.length === 0) await new Promise((resolve) => setImmediate(resolve));
    stop.abort(new Error('closed'));
    await expect(running).rejects.toThrow('closed');
    expect(tries).toBe(1);
    expect(clock.waits).toEqual([60_000]);
    await expect(retry(async () => 1, { what: 'test', retriable: always, signal: stop.signal })).rejects.toThrow('closed');
  });
});

describe('sleep', () => {
  it('waits by the clock given, and an abort ends a real wait at once', async () => {
    const clock = new SteppingClock(0);
    await sleep(250, { clock });
    expect(clock.ms).toBe(250);
    const stop = new AbortController();
    const waiting = sleep(3_600_000, { signal: stop.signal });
    stop.abort(new Error('closed'));
    await expect(waiting).rejects.toThrow('closed');
    await expect(sleep(0, { signal: stop.signal })).rejects.toThrow('closed');
  });
});
