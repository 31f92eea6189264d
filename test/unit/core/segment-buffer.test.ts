import { setImmediate as tick } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { IdmintError, SegmentExhaustedError } from '../../../src/core/errors.js';
import { SegmentBuffer, type SegmentBufferOptions } from '../../../src/core/segment-buffer.js';
import type { Segment } from '../../../src/core/ports.js';
import { ManualClock, memoryLogger } from './helpers.js';
import { expectNoDuplicates } from '../../support/unique.js';

/** An in-memory allocator like the store's: one counter, each call a fresh range. */
function counterAllocator(): { allocate: (bizTag: string, step: number) => Promise<Segment>; steps: number[] } {
  let maxId = 0;
  const steps: number[] = [];
  return {
    steps,
    allocate: async (bizTag, step) => {
      steps.push(step);
      const start = maxId + 1;
      maxId += step;
      return { bizTag, shard: 0, start, end: maxId };
    },
  };
}

function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  return expect.fail('expected a rejection');
}

function buffer(options: Partial<SegmentBufferOptions> & Pick<SegmentBufferOptions, 'allocate'>): SegmentBuffer {
  return new SegmentBuffer({ bizTag: 'order', baseStep: 100, ...options });
}

describe('SegmentBuffer', () => {
  it('serves a segment in order and batches across segment boundaries', async () => {
    const alloc = counterAllocator();
    const buf = buffer({ baseStep: 10, maxStep: 10, allocate: alloc.allocate });
    expect(buf.tryNext()).toBeUndefined();
    expect(await buf.next()).toBe(1);
    const batch = await buf.nextBatch(95);
    expect(batch).toEqual(Array.from({ length: 95 }, (_, i) => i + 2));
    expect(await buf.nextBatch(0)).toEqual([]);
    await expect(buf.nextBatch(-1)).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });

  it("gives a request larger than the step one segment sized to what it still needs; the step keeps Leaf's rule", async () => {
    const alloc = counterAllocator();
    const buf = buffer({ baseStep: 100, maxStep: 1000, allocate: alloc.allocate });
    expect(await buf.next()).toBe(1); // the first segment: 100 IDs
    const blocks = await buf.nextBlocks(5_000_000);
    // The first segment's 99 left, then one allocation of the other 4,999,901 (not 5,000 of the step).
    expect(blocks).toEqual([{ start: 2, end: 5_000_001 }]);
    expect(alloc.steps.slice(0, 2)).toEqual([100, 4_999_901]);
    // The step keeps Leaf's rule (doubling, capped at maxStep), not the big request's size.
    expect(await buf.nextBatch(3)).toEqual([5_000_002, 5_000_003, 5_000_004]);
    expect(Math.max(...alloc.steps.slice(2))).toBeLessThanOrEqual(1000);
    expect(buf.step).toBeLessThanOrEqual(1000);
  });

  it('loads the next segment in the background once 10 % of the current one is used', async () => {
    const alloc = counterAllocator();
    const buf = buffer({ baseStep: 100, maxStep: 100, allocate: alloc.allocate });
    await buf.next();
    for (let i = 0; i < 9; i++) buf.tryNext();
    await tick();
    expect(alloc.steps).toHaveLength(1);
    expect(buf.tryNext()).toBe(11);
    await tick();
    expect(alloc.steps).toHaveLength(2);
    expect(buf.depth()).toBe(89 + 100);
    // The switch to the ready half happens on the sync path.
    for (let i = 12; i <= 100; i++) expect(buf.tryNext()).toBe(i);
    expect(buf.tryNext()).toBe(101);
  });

  it('passes an allocation failure to the caller unchanged and retries on the next call', async () => {
    let fail: Error | undefined = new SegmentExhaustedError('order', 500);
    const alloc = counterAllocator();
    const buf = buffer({
      allocate: async (tag, step) => {
        if (fail) throw fail;
        return alloc.allocate(tag, step);
      },
    });
    const err = await rejection(buf.next());
    expect(err).toBe(fail);
    expect(err).toMatchObject({ code: 'SEGMENT_EXHAUSTED' });
    fail = undefined;
    expect(await buf.next()).toBe(1);
  });

  it('keeps serving when a background load fails, logs it, and retries after retryDelayMs', async () => {
    const clock = new ManualClock(1_000_000);
    const alloc = counterAllocator();
    let failures = 0;
    let down = false;
    const { logger, lines } = memoryLogger();
    const buf = buffer({
      baseStep: 100,
      maxStep: 100,
      clock,
      logger,
      retryDelayMs: 1000,
      allocate: async (tag, step) => {
        if (down) {
          failures++;
          throw new IdmintError('NOT_READY', 'database is unavailable');
        }
        return alloc.allocate(tag, step);
      },
    });
    await buf.next();
    down = true;
    for (let i = 0; i < 20; i++) expect(buf.tryNext()).toBe(i + 2);
    await tick();
    expect(failures).toBe(1);
    expect(lines.some((l) => l.level === 40 && l.component === 'segment-buffer' && l.bizTag === 'order')).toBe(true);
    for (let i = 0; i < 20; i++) buf.tryNext();
    await tick();
    expect(failures).toBe(1);
    clock.advance(1000);
    down = false;
    buf.tryNext();
    await tick();
    expect(buf.depth()).toBe(100 - 42 + 100);
  });

  it('makes callers wait for a slow allocation, then fails with a clear TIMEOUT', async () => {
    const slow = deferred<Segment>();
    const buf = buffer({ waitTimeoutMs: 30, allocate: () => slow.promise });
    const err = await rejection(buf.next());
    expect(err).toMatchObject({ code: 'TIMEOUT', retriable: true });
    expect((err as Error).message).toMatch(/allocating a segment of 100 IDs for biz tag "order".*did not complete within 30 ms/);
    // The late segment is not wasted: it serves the next caller.
    slow.resolve({ bizTag: 'order', shard: 0, start: 501, end: 600 });
    expect(await buf.next()).toBe(501);
  });

  it('lets concurrent callers wait on one slow allocation and get distinct IDs', async () => {
    const slow = deferred<Segment>();
    let calls = 0;
    const buf = buffer({
      waitTimeoutMs: 10_000,
      allocate: () => {
        calls++;
        return slow.promise;
      },
    });
    const waiting = Promise.all([buf.next(), buf.next(), buf.nextBatch(5), buf.next()]);
    await tick();
    slow.resolve({ bizTag: 'order', shard: 0, start: 1, end: 100 });
    const [a, b, batch, c] = await waiting;
    expect(calls).toBeGreaterThanOrEqual(1);
    const distinct = [a, b, c, ...batch];
    expectNoDuplicates(distinct);
    expect(distinct).toHaveLength(8);
  });

  it('doubles the step for segments that last under 15 minutes and halves it for those over 30', async () => {
    const clock = new ManualClock(0);
    const alloc = counterAllocator();
    const buf = buffer({ baseStep: 100, maxStep: 1000, clock, loadAt: 0.5, allocate: alloc.allocate });
    // Takes IDs until exactly one more allocation happens, at the clock's current time.
    const drain = async (): Promise<void> => {
      const n = alloc.steps.length;
      while (alloc.steps.length === n) if (buf.tryNext() === undefined) await buf.next();
      await tick();
    };
    for (let i = 0; i < 6; i++) {
      clock.advance(60_000);
      await drain();
    }
    // First two at base (the first has no duration to judge), then 200, 400, 800, capped at 1000.
    expect(alloc.steps.slice(0, 6)).toEqual([100, 200, 400, 800, 1000, 1000]);
    const lasting = [31, 31, 20, 31, 31, 31];
    for (const minutes of lasting) {
      clock.advance(minutes * 60_000);
      await drain();
    }
    // Over 30 minutes halves (never below the base step); between 15 and 30 keeps the step.
    expect(alloc.steps.slice(-6)).toEqual([500, 250, 250, 125, 100, 100]);
    expect(buf.step).toBe(100);
  });

  it('does not grow the step on failed allocations', async () => {
    const clock = new ManualClock(0);
    const alloc = counterAllocator();
    let down = true;
    const tried: number[] = [];
    const buf = buffer({
      baseStep: 100,
      clock,
      allocate: async (tag, step) => {
        tried.push(step);
        if (down) throw new IdmintError('NOT_READY', 'database is unavailable');
        return alloc.allocate(tag, step);
      },
    });
    for (let i = 0; i < 3; i++) await expect(buf.next()).rejects.toMatchObject({ code: 'NOT_READY' });
    down = false;
    await buf.next();
    clock.advance(60 * 60_000);
    await buf.nextBatch(100);
    expect(tried).toEqual([100, 100, 100, 100, 100]);
  });

  it('refuses a segment that overlaps IDs already served', async () => {
    const buf = buffer({ allocate: async (bizTag) => ({ bizTag, shard: 0, start: 1, end: 100 }) });
    await buf.nextBatch(100);
    const err = await rejection(buf.next());
    expect(err).toMatchObject({ code: 'NOT_READY' });
    expect((err as Error).message).toMatch(/refusing to repeat IDs/);
  });

  it('rejects invalid segments and options', async () => {
    const buf = buffer({ allocate: async (bizTag) => ({ bizTag, shard: 0, start: 10, end: 5 }) });
    await expect(buf.next()).rejects.toMatchObject({ code: 'NOT_READY' });
    const allocate = counterAllocator().allocate;
    expect(() => buffer({ baseStep: 0, allocate })).toThrow(IdmintError);
    expect(() => buffer({ baseStep: 10, maxStep: 5, allocate })).toThrow(IdmintError);
    expect(() => buffer({ loadAt: 1, allocate })).toThrow(IdmintError);
    expect(() => buffer({ waitTimeoutMs: 0, allocate })).toThrow(IdmintError);
    expect(Object.isFrozen(buffer({ allocate }).options)).toBe(true);
  });

  it('on close, rejects waiting callers and later calls with NOT_READY', async () => {
    const slow = deferred<Segment>();
    const buf = buffer({ waitTimeoutMs: 10_000, allocate: () => slow.promise });
    const waiting = buf.next();
    await tick();
    buf.close();
    buf.close();
    await expect(waiting).rejects.toMatchObject({ code: 'NOT_READY' });
    await expect(buf.next()).rejects.toMatchObject({ code: 'NOT_READY' });
    expect(buf.tryNext()).toBeUndefined();
    expect(buf.depth()).toBe(0);
    slow.resolve({ bizTag: 'order', shard: 0, start: 1, end: 100 });
  });

  it('never hands out an ID twice to many concurrent callers under failing and slow allocations', async () => {
    let seed = 7;
    const rand = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const alloc = counterAllocator();
    const buf = new SegmentBuffer({
      bizTag: 'chaos',
      baseStep: 50,
      maxStep: 400,
      waitTimeoutMs: 20,
      retryDelayMs: 0,
      allocate: async (tag, step) => {
        const r = rand();
        if (r < 0.2) throw new IdmintError('NOT_READY', 'database is unavailable');
        if (r < 0.4) await new Promise((res) => setTimeout(res, Math.floor(rand() * 40)));
        return alloc.allocate(tag, step);
      },
    });
    const seen = new Set<number>();
    let dups = 0;
    let failures = 0;
    const record = (id: number): void => {
      if (seen.has(id)) dups++;
      seen.add(id);
    };
    const caller = async (): Promise<void> => {
      while (seen.size < 100_000) {
        const r = rand();
        try {
          if (r < 0.4) {
            for (let i = 0; i < 50; i++) {
              const id = buf.tryNext();
              if (id === undefined) break;
              record(id);
            }
            await tick();
          } else if (r < 0.7) record(await buf.next());
          else for (const id of await buf.nextBatch(1 + Math.floor(rand() * 300))) record(id);
        } catch (err) {
          expect(['NOT_READY', 'TIMEOUT']).toContain((err as IdmintError).code);
          failures++;
        }
      }
    };
    await Promise.all(Array.from({ length: 16 }, caller));
    expect(dups).toBe(0);
    expect(failures).toBeGreaterThan(0);
    expect(Math.max(...seen)).toBeLessThanOrEqual(alloc.steps.reduce((a, b) => a + b, 0));
    buf.close();
  });
});

/** An allocator under a max_limit, like the store's: short segments near it, then SEGMENT_EXHAUSTED. */
function limitedAllocator(maxLimit: number): (bizTag: string, step: number) => Promise<Segment> {
  let maxId = 0;
  return async (bizTag, step) => {
    if (maxId >= maxLimit) throw new SegmentExhaustedError(bizTag, maxLimit);
    const start = maxId + 1;
    maxId = Math.min(maxId + step, maxLimit);
    return { bizTag, shard: 0, start, end: maxId };
  };
}

describe('SegmentBuffer near max_limit', () => {
  it('a request larger than what remains consumes nothing and says how many remain', async () => {
    const buf = buffer({ baseStep: 2, maxStep: 2, allocate: limitedAllocator(5) });
    const err = await rejection(buf.nextBatch(7));
    expect(err).toBeInstanceOf(SegmentExhaustedError);
    expect(err).toMatchObject({ code: 'SEGMENT_EXHAUSTED', details: { remaining: 5, maxLimit: 5 } });
    expect((err as Error).message).toMatch(/only 5 IDs left .* ask for at most 5/);
    // Nothing was burnt: IDs 1–5 are all still issued, once each, to smaller requests.
    const got = [...(await buf.nextBatch(3)), await buf.next(), ...(await buf.nextBatch(1))];
    expect(got.sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5]);
    await expect(buf.nextBatch(1)).rejects.toMatchObject({ code: 'SEGMENT_EXHAUSTED', details: { bizTag: 'order', maxLimit: 5 } });
  });

  it('concurrent oversized requests give every ID back; the sum is still served exactly once', async () => {
    const buf = buffer({ baseStep: 3, maxStep: 3, allocate: limitedAllocator(10) });
    const outcomes = await Promise.allSettled([buf.nextBatch(8), buf.nextBatch(8), buf.nextBatch(8)]);
    // At most one can be served in full (it may take what the others gave back); the rest are refused.
    expect(outcomes.filter((o) => o.status === 'rejected').length).toBeGreaterThanOrEqual(2);
    const all = outcomes.flatMap((o) => (o.status === 'fulfilled' ? o.value : []));
    for (;;) {
      const id = buf.tryNext() ?? (await buf.nextBatch(1).catch(() => [] as number[]))[0];
      if (id === undefined) break;
      all.push(id);
    }
    expect(all.sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });
});

describe('SegmentBuffer.setStep', () => {
  it('applies a new step from the next segment and keeps serving the buffered one, without a gap', async () => {
    const alloc = counterAllocator();
    const buf = buffer({ baseStep: 10, maxStep: 10, loadAt: 0.99, allocate: alloc.allocate });
    expect(await buf.nextBatch(5)).toEqual([1, 2, 3, 4, 5]);
    buf.setStep(1000, 1000);
    expect(await buf.nextBatch(10)).toEqual([6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
    expect(alloc.steps).toEqual([10, 1000]);
  });

  it('refuses a step that is not a positive integer', () => {
    const buf = buffer({ allocate: counterAllocator().allocate });
    expect(() => buf.setStep(0)).toThrow(/option baseStep must be an integer ≥ 1/);
  });
});
