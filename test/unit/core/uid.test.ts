import { setImmediate as tick } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { IdmintError } from '../../../src/core/errors.js';
import { createLayout, createUidLayout, UID_LAYOUT } from '../../../src/core/layout.js';
import { CachedUidGenerator, throwOnRejectedTake } from '../../../src/core/cached-uid.js';
import { DefaultUidGenerator } from '../../../src/core/uid.js';
import { codeOf, ManualClock } from './helpers.js';
import { expectNoDuplicates } from '../../support/unique.js';
import { until } from '../../support/poll.js';
import { serveWhilePadding } from '../../support/generator-scale.js';

describe('DefaultUidGenerator', () => {
  it('fills a second, then waits for the next one instead of wrapping', () => {
    const clock = new ManualClock(Date.parse('2026-03-01T00:00:00.250Z'));
    const slept: number[] = [];
    const gen = new DefaultUidGenerator({
      workerId: 77,
      clock,
      sleep: (ms) => {
        slept.push(ms);
        clock.advance(ms);
      },
    });
    const ids = gen.getUids(8192 * 3 + 5);
    expectNoDuplicates(ids);
    expect(slept).toEqual([750, 1000, 1000]);
    const last = gen.parseUid(ids.at(-1)!);
    expect(last).toMatchObject({ worker: 77, sequence: 4, time: '2026-03-01T00:00:03.000Z' });
    expect(gen.parseUid(ids[8191]!)).toMatchObject({ sequence: 8191, time: '2026-03-01T00:00:00.000Z' });
  });

  it('throws CLOCK_BACKWARDS on any step back across a second', () => {
    const clock = new ManualClock(Date.parse('2026-03-01T00:00:05.000Z'));
    const gen = new DefaultUidGenerator({ workerId: 1, clock });
    gen.getUid();
    clock.advance(-1);
    expect(codeOf(() => gen.getUid())).toBe('CLOCK_BACKWARDS');
    clock.advance(1);
    expect(gen.getUid() > 0n).toBe(true);
  });

  it('issues unique, increasing IDs across a real second boundary', () => {
    const gen = new DefaultUidGenerator({ workerId: 4_194_303 });
    // 8,192 IDs per second is the layout's ceiling: this crosses at least one second.
    const ids = gen.getUids(12_000);
    expectNoDuplicates(ids);
    for (let i = 1; i < ids.length; i++) if (ids[i]! <= ids[i - 1]!) expect.fail(`not increasing at ${i}`);
  });

  it('refuses worker ids beyond 22 bits and a layout past its time bits', () => {
    expect(codeOf(() => new DefaultUidGenerator({ workerId: 4_194_304 }))).toBe('WORKER_ID_UNAVAILABLE');
    expect(codeOf(() => new DefaultUidGenerator({ workerId: 1, layout: createUidLayout('2016-05-20T00:00:00Z') }))).toBe('CONFIG_INVALID');
  });
});

describe('CachedUidGenerator', () => {
  it('sizes its ring as (maxSequence + 1) << boostPower and fills it on start', () => {
    const gen = new CachedUidGenerator({ workerId: 1 });
    expect(gen.bufferSize).toBe(8192 << 3);
    gen.start();
    gen.start();
    expect(gen.depth()).toBe(65_536);
    gen.close();
  });

  // At a million here; at 10 million in the chaos project (test/chaos/generators-scale.test.ts).
  it('serves a million IDs to several concurrent async takers while padding runs: strictly increasing, none repeated', async () => {
    await serveWhilePadding(1_000_000, 1_000_000);
  });

  it("never repeats when takers outrun padding and takes are rejected (uid-generator's throwing policy)", async () => {
    let rejected = 0;
    const gen = new CachedUidGenerator({
      workerId: 3,
      boostPower: 0,
      onRejectedTake: (ring) => {
        rejected++;
        throwOnRejectedTake(ring);
      },
    });
    gen.start();
    const ids: bigint[] = [];
    const taker = async (): Promise<void> => {
      for (let round = 0; round < 60; round++) {
        for (let i = 0; i < 5000; i++) {
          try {
            ids.push(gen.getUid());
          } catch (err) {
            expect((err as IdmintError).code).toBe('POOL_EMPTY');
            break;
          }
        }
        await tick();
      }
    };
    await Promise.all([taker(), taker(), taker(), taker()]);
    expect(rejected).toBeGreaterThan(0);
    expect(ids.length).toBeGreaterThan(100_000);
    expectNoDuplicates(ids);
    gen.close();
  });

  it('pads inline by default when the ring is empty, so a sync burst larger than the ring succeeds', () => {
    const gen = new CachedUidGenerator({ workerId: 5, boostPower: 0 });
    gen.start();
    const ids = gen.getUids(8192 * 10);
    expectNoDuplicates(ids);
    gen.close();
  });

  it('borrows future seconds but never falls behind the clock, and ignores clock steps back', () => {
    const clock = new ManualClock(Date.parse('2026-06-01T12:00:00.000Z'));
    const gen = new CachedUidGenerator({ workerId: 6, boostPower: 0, clock });
    gen.start();
    const first = gen.parseUid(gen.getUid());
    expect(first.time).toBe('2026-06-01T12:00:00.000Z');
    const burst = gen.getUids(8192 * 3);
    // Three seconds' worth with a frozen clock: the counter borrowed them.
    expect(gen.parseUid(burst.at(-1)!).time).toBe('2026-06-01T12:00:03.000Z');
    clock.advance(3_600_000);
    gen.getUids(8192);
    const later = gen.parseUid(gen.getUid());
    expect(Date.parse(later.time)).toBeGreaterThanOrEqual(clock.ms - 1000);
    clock.advance(-7_200_000);
    const afterStepBack = gen.getUids(8192 * 2);
    expectNoDuplicates([...burst, ...afterStepBack]);
    expect(afterStepBack[0]! > burst.at(-1)!).toBe(true);
    gen.close();
  });

  it('refills in the background on its schedule', async () => {
    const gen = new CachedUidGenerator({ workerId: 7, boostPower: 2, paddingFactor: 10, scheduleIntervalMs: 10 });
    gen.start();
    gen.getUids(8192 * 2);
    // Above the padding threshold, so only the scheduled padding can refill it.
    expect(gen.depth()).toBe(8192 * 2);
    await until('the ring to be padded full', () => gen.depth() === 8192 * 4, { timeoutMs: 5000, intervalMs: 5 });
    gen.close();
  });

  it('refuses takes after close and starts lazily on first take', () => {
    const gen = new CachedUidGenerator({ workerId: 8, boostPower: 0 });
    expect(gen.getUid() > 0n).toBe(true);
    gen.close();
    expect(codeOf(() => gen.getUid())).toBe('NOT_READY');
    expect(codeOf(() => gen.start())).toBe('NOT_READY');
  });

  it('validates options and the layout', () => {
    expect(codeOf(() => new CachedUidGenerator({ workerId: 1, paddingFactor: 100 }))).toBe('CONFIG_INVALID');
    expect(codeOf(() => new CachedUidGenerator({ workerId: 1, boostPower: -1 }))).toBe('CONFIG_INVALID');
    expect(codeOf(() => new CachedUidGenerator({ workerId: 1, scheduleIntervalMs: 0 }))).toBe('CONFIG_INVALID');
    expect(codeOf(() => new CachedUidGenerator({ workerId: 2 ** 22 }))).toBe('WORKER_ID_UNAVAILABLE');
    // 2^15 IDs a second << 10 is 2^25 slots: more than the ring may hold.
    const wide = createLayout({ name: 'wide', timeBits: 28, workerBits: 20, sequenceBits: 15, epoch: '2025-01-01T00:00:00Z', timeUnit: 's' });
    expect(() => new CachedUidGenerator({ workerId: 1, boostPower: 10, layout: wide })).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID', field: 'boostPower', message: expect.stringMatching(/lower it$/) }),
    );
    expect(() => new CachedUidGenerator({ workerId: 1, paddingFactor: 0 })).toThrow(
      expect.objectContaining({ field: 'paddingFactor', message: expect.stringMatching(/^CachedUidGenerator: option paddingFactor/) }),
    );
    const defaults = new CachedUidGenerator({ workerId: 1, boostPower: undefined, paddingFactor: undefined });
    expect(defaults.bufferSize).toBe(8192 << 3);
    expect(defaults.paddingThreshold).toBe((8192 << 3) / 2);
    expect(UID_LAYOUT.maxSequence).toBe(8191);
  });
});
