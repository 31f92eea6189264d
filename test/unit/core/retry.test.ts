import { describe, expect, it } from 'vitest';
import { retry } from '../../../src/core/retry.js';
import { SteppingClock } from './helpers.js';

const failing = (times: number, error: Error) => {
  let calls = 0;
  return async () => {
    if (++calls <= times) throw error;
    return calls;
  };
};

describe('retry', () => {
  it('asks again after doubling waits until the attempt succeeds', async () => {
    const clock = new SteppingClock(0);
    await expect(retry(failing(4, new Error('moving')), { retriable: () => true, timeoutMs: 10_000, initialMs: 100, maxMs: 500 }, clock)).resolves.toBe(5);
    expect(clock.waits).toEqual([100, 200, 400, 500]);
  });

  it('throws a failure that is not retriable at once, and the last one when the time is up', async () => {
    const clock = new SteppingClock(0);
    await expect(retry(failing(1, new Error('final')), { retriable: () => false, timeoutMs: 10_000 }, clock)).rejects.toThrow('final');
    expect(clock.waits).toEqual([]);
    await expect(retry(failing(100, new Error('still moving')), { retriable: () => true, timeoutMs: 1000, initialMs: 100, maxMs: 1000 }, clock)).rejects.toThrow('still moving');
    expect(clock.waits).toEqual([100, 200, 400]);
  });
});
