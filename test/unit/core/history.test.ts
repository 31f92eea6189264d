import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { IssueHistory } from '../../../src/core/history.js';

const clockAt = (start: number) => {
  const clock = { t: start, now: () => clock.t };
  return clock;
};

describe('IssueHistory', () => {
  it('counts per source per bucket, oldest first, with empty buckets as zeros', () => {
    const clock = clockAt(1_000_000);
    const history = new IssueHistory(1000, 5, clock);
    history.record('pool', 10);
    history.record('snowflake', 2);
    clock.t += 2000;
    history.record('segment', 7);
    const snap = history.snapshot();
    expect(snap).toHaveLength(5);
    expect(snap.map((b) => b.at)).toEqual([998_000, 999_000, 1_000_000, 1_001_000, 1_002_000]);
    expect(snap[2]).toMatchObject({ pool: 10, snowflake: 2, segment: 0 });
    expect(snap[4]).toMatchObject({ pool: 0, segment: 7 });
  });

  it('forgets buckets older than its window, and keeps the total of the window', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 3000 }), fc.integer({ min: 1, max: 100 })), { maxLength: 200 }), (steps) => {
        const clock = clockAt(0);
        const history = new IssueHistory(100, 10, clock);
        const recorded: Array<[number, number]> = [];
        for (const [advance, count] of steps) {
          clock.t += advance;
          history.record('pool', count);
          recorded.push([clock.t, count]);
        }
        const windowStart = Math.floor(clock.t / 100) * 100 - 900;
        const expected = recorded.filter(([t]) => t >= windowStart).reduce((s, [, c]) => s + c, 0);
        return history.snapshot().reduce((s, b) => s + b.pool, 0) === expected;
      }),
    );
  });
});
