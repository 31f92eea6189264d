import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createIdmintClient, IdmintError } from '../../../src/client/index.js';
import type { IdmintClient, IdTransport } from '../../../src/client/index.js';
import { FakeTransport, settle } from './fake-transport.js';
import { YIELD_EVERY } from '../../../src/client/client.js';
import { rejection } from '../../support/assertions.js';
import { codeOf } from '../core/helpers.js';
import { expectNoDuplicates } from '../../support/unique.js';

const range = (from: number, to: number): bigint[] => Array.from({ length: to - from + 1 }, (_, i) => BigInt(from + i));

/**
 * Runs each op when the scheduler says, as concurrent callers of one client; NOT_READY (a failed
 * fetch) is an allowed answer. Then: no ID handed out twice, and every ID one the transport issued.
 */
async function expectNoRepeats<O extends { kind: string }>(
  s: fc.Scheduler,
  c: IdmintClient,
  issued: ReadonlySet<bigint>,
  ops: readonly O[],
  run: (op: O) => Promise<bigint[]>,
): Promise<void> {
  const calls = ops.map((o) =>
    s
      .schedule(Promise.resolve(), o.kind)
      .then(() => run(o))
      .catch((err: unknown) => {
        if (!(err instanceof IdmintError) || err.code !== 'NOT_READY') throw err;
        return [];
      }),
  );
  const handed = (await s.waitFor(Promise.all(calls))).flat();
  await c.close();
  expectNoDuplicates(handed);
  for (const id of handed) expect(issued.has(id)).toBe(true);
}

describe('client double buffer: prefetch', () => {
  it('fetches the next batch in the background once less than prefetchAt of the current one remains', async () => {
    const t = new FakeTransport();
    const c = createIdmintClient({ transport: t, batchSize: 10, maxBatchSize: 10, prefetchAt: 0.2 });
    expect(await c.nextMany('order', 8)).toEqual(range(1, 8));
    await settle();
    // 2 of 10 left is exactly 20 %, not under it.
    expect(t.asks).toEqual([10]);
    expect(await c.next('order')).toBe(9n);
    expect(t.asks).toEqual([10, 10]);
    await settle();
    expect(c.stats()).toMatchObject([{ bizTag: 'order', buffered: 11, fetching: false }]);
    // The prefetched batch serves without another round trip.
    t.hold = true;
    expect(await c.nextMany('order', 11)).toEqual(range(10, 20));
    expect(t.asks).toHaveLength(3);
    await c.close();
  });

  it('with prefetchAt 0 fetches only when the buffer is empty', async () => {
    const t = new FakeTransport();
    const c = createIdmintClient({ transport: t, batchSize: 10, maxBatchSize: 10, prefetchAt: 0 });
    await c.nextMany('order', 9);
    await settle();
    expect(t.asks).toEqual([10]);
    await c.next('order');
    await settle();
    expect(t.asks).toEqual([10, 10]);
    await c.close();
  });

  it('starts fetching the tags named in bizTags at construction', async () => {
    const t = new FakeTransport();
    const c = createIdmintClient({ transport: t, bizTags: ['order', 'user'], batchSize: 5 });
    expect(t.asks).toEqual([5, 5]);
    await settle();
    expect(c.stats().map((s) => s.buffered)).toEqual([5, 5]);
    await c.close();
  });
});

describe('client double buffer: one fetch in flight per tag', () => {
  it('64 concurrent callers share one fetch and get distinct IDs', async () => {
    const t = new FakeTransport();
    t.hold = true;
    const c = createIdmintClient({ transport: t });
    const calls = Array.from({ length: 64 }, (_, i) => (i % 2 ? c.next('order') : c.nextMany('order', 3)));
    await settle();
    expect(t.asks).toEqual([1000]);
    // Another tag has its own buffer and its own fetch.
    const other = c.next('user');
    await settle();
    expect(t.asks).toEqual([1000, 1000]);
    expect(t.inFlight).toBe(2);
    t.release();
    const ids = (await Promise.all(calls)).flat();
    expect(ids).toHaveLength(32 * 3 + 32);
    expectNoDuplicates(ids);
    expect(await other).toBe(1001n);
    await c.close();
  });

  it('callers that drain the buffer wait on the prefetch in flight instead of starting another', async () => {
    const t = new FakeTransport();
    const c = createIdmintClient({ transport: t, batchSize: 10, maxBatchSize: 10 });
    await c.nextMany('order', 8);
    t.hold = true;
    await c.next('order'); // under 20 %: the prefetch starts and is held
    expect(t.asks).toEqual([10, 10]);
    const waiting = Array.from({ length: 5 }, () => c.next('order'));
    await settle();
    expect(t.asks).toEqual([10, 10]);
    t.release();
    expect((await Promise.all(waiting)).sort((a, b) => Number(a - b))).toEqual(range(10, 14));
    await c.close();
  });

  it('a short answer is used and the rest fetched again', async () => {
    const t = new FakeTransport();
    t.cap = 3;
    const c = createIdmintClient({ transport: t, batchSize: 10, maxBatchSize: 10 });
    expect(await c.nextMany('order', 10)).toEqual(range(1, 10));
    expect(t.asks.length).toBeGreaterThanOrEqual(4);
    await c.close();
  });

  it('a nextMany larger than maxBatchSize spans several fetches', async () => {
    const t = new FakeTransport();
    const c = createIdmintClient({ transport: t, batchSize: 100, maxBatchSize: 1000 });
    const ids = await c.nextMany('order', 5000);
    expect(ids).toEqual(range(1, 5000));
    expect(Math.max(...t.asks)).toBe(1000);
    expect(await c.nextMany('order', 0)).toEqual([]);
    await c.close();
  });
});

describe('client double buffer: adaptive batch size', () => {
  it('doubles the batch while batches last under batchLifeMs and halves it back when they last over twice that', async () => {
    let now = 0;
    const t = new FakeTransport();
    const c = createIdmintClient({ transport: t, batchSize: 10, maxBatchSize: 80, prefetchAt: 0, batchLifeMs: 1000, clock: { now: () => now } });
    for (const n of [10, 20, 40, 80, 80]) {
      expect(t.asks.at(-1) ?? 10).toBe(n);
      await c.nextMany('order', n);
      await settle();
    }
    expect(t.asks).toEqual([10, 20, 40, 80, 80, 80]);
    for (const n of [80, 40, 20, 10]) {
      expect(t.asks.at(-1)).toBe(n);
      await c.next('order');
      now += 5000;
      await c.nextMany('order', n - 1);
      await settle();
    }
    expect(t.asks.slice(6)).toEqual([40, 20, 10, 10]);
    // In between (lasting 1 to 2 batchLifeMs) the size holds.
    await c.next('order');
    now += 1500;
    await c.nextMany('order', 9);
    await settle();
    expect(t.asks.at(-1)).toBe(10);
    expect(c.stats()[0]?.batchSize).toBe(10);
    await c.close();
  });
});

describe('client double buffer: errors', () => {
  it('a transport error reaches every waiting caller and the next call fetches again', async () => {
    const t = new FakeTransport();
    t.hold = true;
    t.failures = [new IdmintError('POOL_EMPTY', 'dry')];
    const c = createIdmintClient({ transport: t });
    const calls = [c.next('order'), c.nextMany('order', 5), c.nextNumber('order')];
    await settle();
    t.release();
    for (const call of calls) expect(await rejection(call)).toMatchObject({ code: 'POOL_EMPTY', message: 'dry' });
    expect(t.asks).toHaveLength(1);
    t.hold = false;
    expect(await c.next('order')).toBe(1n);
    expect(t.asks).toHaveLength(2);
    expect(c.stats()[0]).toMatchObject({ fetches: 2, fetchFailures: 1 });
    await c.close();
  });

  it('forgets the buffer of a tag the server does not know', async () => {
    const t = new FakeTransport();
    t.failures = [new IdmintError('UNKNOWN_BIZ_TAG', 'unknown biz tag "ghost"')];
    const c = createIdmintClient({ transport: t });
    expect((await rejection(c.next('ghost'))).code).toBe('UNKNOWN_BIZ_TAG');
    expect(c.stats()).toEqual([]);
    // Created since: the next call asks again.
    expect(await c.next('ghost')).toBe(1n);
    expect(c.stats().map((s) => s.bizTag)).toEqual(['ghost']);
    await c.close();
  });

  it('a non-idmint failure becomes NOT_READY with its cause', async () => {
    const t = new FakeTransport();
    const boom = new TypeError('socket hang up');
    t.failures = [boom];
    const c = createIdmintClient({ transport: t });
    const err = await rejection(c.next('order'));
    expect(err.code).toBe('NOT_READY');
    expect(err.cause).toBe(boom);
    await c.close();
  });

  it('an empty or malformed answer is an error, not an ID', async () => {
    const answers: Array<{ ids: string[] }> = [{ ids: [] }, { ids: ['12', 'x'] }, { ids: ['0'] }, { ids: ['9223372036854775808'] }, { ids: ['007'] }];
    const t: IdTransport = { fetch: async () => ({ source: 'pool', ...(answers.shift() as { ids: string[] }) }), close: async () => undefined };
    const c = createIdmintClient({ transport: t });
    expect((await rejection(c.next('order'))).code).toBe('POOL_EMPTY');
    for (let i = 0; i < 4; i++) expect((await rejection(c.next('order'))).message).toMatch(/malformed ID/);
    await c.close();
  });

  it('a caller waiting longer than timeoutMs gets TIMEOUT; the late batch serves the next call', async () => {
    const t = new FakeTransport();
    t.hold = true;
    const c = createIdmintClient({ transport: t, timeoutMs: 20 });
    expect((await rejection(c.next('order'))).code).toBe('TIMEOUT');
    t.release();
    await settle();
    t.hold = false;
    expect(await c.next('order')).toBe(1n);
    expect(t.asks).toHaveLength(1);
    await c.close();
  });

  it('validates its options (CONFIG_INVALID) and tags (BAD_REQUEST)', async () => {
    const t = new FakeTransport();
    for (const bad of [
      { batchSize: 0 },
      { batchSize: 1.5 },
      { maxBatchSize: 10 },
      { prefetchAt: 1 },
      { prefetchAt: -0.1 },
      { timeoutMs: 0 },
      { batchLifeMs: Number.NaN },
    ]) {
      expect(() => createIdmintClient({ transport: t, ...bad })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    }
    expect(() => createIdmintClient({})).toThrow(/transport/);
    expect(() => createIdmintClient({ transport: t, url: 'http://127.0.0.1:1' })).toThrow(/one of `transport`, `url` or `urls`/);
    const c = createIdmintClient({ transport: t });
    expect(Object.isFrozen(c.settings)).toBe(true);
    expect((await rejection(c.next('Order!'))).code).toBe('BAD_REQUEST');
    expect((await rejection(c.nextMany('order', -1))).code).toBe('BAD_REQUEST');
    expect((await rejection(c.nextMany('order', 1.5))).code).toBe('BAD_REQUEST');
    expect(t.asks).toEqual([]);
    await c.close();
  });
});

describe('client: nextNumber', () => {
  it('returns numbers below 2^53 and refuses a larger ID with BAD_REQUEST, leaving it for next()', async () => {
    const t = new FakeTransport(2n ** 53n - 2n);
    const c = createIdmintClient({ transport: t, batchSize: 4, maxBatchSize: 4 });
    expect(await c.nextNumber('mixed')).toBe(Number.MAX_SAFE_INTEGER - 1);
    expect(await c.nextNumber('mixed')).toBe(Number.MAX_SAFE_INTEGER);
    const err = await rejection(c.nextNumber('mixed'));
    expect(err.code).toBe('BAD_REQUEST');
    expect(err.message).toMatch(/use next\(\)/);
    expect(await c.next('mixed')).toBe(2n ** 53n);
    await c.close();
  });
});

describe('client: close', () => {
  it('is idempotent, closes the transport once and rejects later and waiting calls with NOT_READY', async () => {
    const t = new FakeTransport();
    const c = createIdmintClient({ transport: t });
    expect(await c.next('order')).toBe(1n);
    t.hold = true;
    const waiting = c.nextMany('order', 2000);
    await settle();
    const first = c.close();
    expect(c.close()).toBe(first);
    await first;
    expect(t.closed).toBe(1);
    t.release();
    expect((await rejection(waiting)).code).toBe('NOT_READY');
    for (const call of [c.next('order'), c.nextMany('order', 3), c.nextNumber('user')]) {
      expect((await rejection(call)).code).toBe('NOT_READY');
    }
  });
});

describe('client: interleavings', () => {
  it('never hands one ID to two callers, whatever order fetches, failures and callers interleave in', async () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('next' as const), tag: fc.constantFrom('a', 'b') }),
      fc.record({ kind: fc.constant('many' as const), tag: fc.constantFrom('a', 'b'), n: fc.integer({ min: 0, max: 25 }) }),
      fc.record({ kind: fc.constant('number' as const), tag: fc.constantFrom('a', 'b') }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.scheduler(),
        fc.array(op, { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 1, max: 8 }),
        fc.double({ min: 0, max: 0.9, noNaN: true }),
        fc.array(fc.boolean(), { maxLength: 30 }),
        fc.integer({ min: 1, max: 10 }),
        async (s, ops, batchSize, prefetchAt, failPattern, cap) => {
          let next = 1n;
          const issued = new Set<bigint>();
          const transport: IdTransport = {
            fetch: (_tag, count) =>
              s.schedule(Promise.resolve(), 'fetch').then(() => {
                if (failPattern.shift()) throw new IdmintError('NOT_READY', 'down');
                const ids: string[] = [];
                for (let i = 0; i < Math.min(count, cap); i++) {
                  issued.add(next);
                  ids.push(String(next++));
                }
                return { ids, source: 'pool' as const };
              }),
            close: async () => undefined,
          };
          const c = createIdmintClient({ transport, batchSize, maxBatchSize: batchSize * 4, prefetchAt });
          await expectNoRepeats(s, c, issued, ops, async (o) =>
            o.kind === 'many' ? c.nextMany(o.tag, o.n) : o.kind === 'next' ? [await c.next(o.tag)] : [BigInt(await c.nextNumber(o.tag))],
          );
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('client: blocks and the synchronous take', () => {
  it('never hands one ID twice when tryNextNumber, tryNextNumbers, tryNext, next, nextMany and nextStrings interleave on blocks', async () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('tryNumber' as const), n: fc.integer({ min: 1, max: 60 }) }),
      fc.record({ kind: fc.constant('tryNumbers' as const), n: fc.integer({ min: 0, max: 80 }) }),
      fc.record({ kind: fc.constant('try' as const), n: fc.integer({ min: 1, max: 5 }) }),
      fc.record({ kind: fc.constant('next' as const), n: fc.constant(1) }),
      fc.record({ kind: fc.constant('many' as const), n: fc.integer({ min: 0, max: 40 }) }),
      fc.record({ kind: fc.constant('strings' as const), n: fc.integer({ min: 0, max: 40 }) }),
      fc.record({ kind: fc.constant('number' as const), n: fc.constant(1) }),
      fc.record({ kind: fc.constant('stats' as const), n: fc.constant(0) }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.scheduler(),
        fc.array(op, { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 1, max: 50 }),
        fc.double({ min: 0, max: 0.9, noNaN: true }),
        fc.array(fc.boolean(), { maxLength: 30 }),
        fc.integer({ min: 1, max: 4 }),
        async (s, ops, batchSize, prefetchAt, failPattern, pieces) => {
          let next = 1;
          const issued = new Set<bigint>();
          const transport: IdTransport = {
            fetch: () => Promise.reject(new Error('lists are not used for this tag')),
            // `count` IDs as up to `pieces` blocks, with a gap between blocks (as a pool's ranges have).
            fetchBlocks: (_tag, count) =>
              s.schedule(Promise.resolve(), 'fetchBlocks').then(() => {
                if (failPattern.shift()) throw new IdmintError('NOT_READY', 'down');
                const blocks = [];
                let left = count;
                for (let p = 0; p < pieces && left > 0; p++) {
                  const size = p === pieces - 1 ? left : Math.max(1, Math.floor(left / 2));
                  blocks.push({ start: next, end: next + size - 1 });
                  for (let i = 0; i < size; i++) issued.add(BigInt(next + i));
                  next += size + 3;
                  left -= size;
                }
                return { blocks, source: 'pool' as const };
              }),
            close: async () => undefined,
          };
          const c = createIdmintClient({ transport, batchSize, maxBatchSize: batchSize * 4, prefetchAt });
          const tag = c.tag('blk');
          const run = async (o: { kind: string; n: number }): Promise<bigint[]> => {
            const out: bigint[] = [];
            switch (o.kind) {
              case 'tryNumber':
                for (let i = 0; i < o.n; i++) {
                  const id = tag.tryNextNumber();
                  if (id !== undefined) out.push(BigInt(id));
                }
                return out;
              case 'tryNumbers': {
                // Into the middle of a typed array: the slots around the written ones stay untouched.
                const into = new Float64Array(o.n + 2).fill(-1);
                const k = tag.tryNextNumbers(into, 1, o.n);
                expect(into[0]).toBe(-1);
                expect(into[k + 1]).toBe(-1);
                return Array.from(into.subarray(1, k + 1), (id) => BigInt(id));
              }
              case 'try':
                for (let i = 0; i < o.n; i++) {
                  const id = tag.tryNext();
                  if (id !== undefined) out.push(id);
                }
                return out;
              case 'next':
                return [await tag.next()];
              case 'many':
                return c.nextMany('blk', o.n);
              case 'strings':
                return (await c.nextStrings('blk', o.n)).map(BigInt);
              case 'number':
                return [BigInt(await tag.nextNumber())];
              default:
                c.stats();
                return out;
            }
          };
          await expectNoRepeats(s, c, issued, ops, run);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('tryNextNumber hands out a block in order, prefetches the next at the mark, and moves on to it', async () => {
    let next = 1;
    const asks: number[] = [];
    const transport: IdTransport = {
      fetch: () => Promise.reject(new Error('unused')),
      fetchBlocks: async (_tag, count) => {
        asks.push(count);
        const block = { start: next, end: next + count - 1 };
        next += count + 100;
        return { blocks: [block], source: 'segment' as const };
      },
      close: async () => undefined,
    };
    const c = createIdmintClient({ transport, batchSize: 10_000, maxBatchSize: 10_000, prefetchAt: 0.2 });
    expect(c.tryNextNumber('t')).toBeUndefined();
    await settle();
    const got: number[] = [];
    for (let i = 0; i < 8_000; i++) got.push(c.tryNextNumber('t')!);
    expect(got).toEqual(Array.from({ length: 8_000 }, (_, i) => i + 1));
    expect(asks).toHaveLength(1);
    got.length = 0;
    for (let i = 0; i < 1_000; i++) got.push(c.tryNextNumber('t')!); // past the mark: the prefetch starts
    await settle();
    expect(asks).toHaveLength(2);
    expect(c.stats()[0]!.buffered).toBe(1_000 + 10_000);
    for (let i = 0; i < 1_001; i++) got.push(c.tryNextNumber('t')!);
    expect(got.at(-1)).toBe(10_101); // the first ID of the second block
    expectNoDuplicates(got);
    await c.close();
  });

  it('tryNextNumbers fills an array across blocks, says how many, and refuses what cannot be numbers', async () => {
    let next = 1;
    const transport: IdTransport = {
      fetch: async () => ({ ids: ['9007199254740993'], source: 'snowflake' as const }),
      fetchBlocks: async (tag, count) => {
        if (tag === 'flake') throw new IdmintError('BAD_REQUEST', 'not contiguous');
        const block = { start: next, end: next + count - 1 };
        next += count + 10;
        return { blocks: [block], source: 'pool' as const };
      },
      close: async () => undefined,
    };
    const c = createIdmintClient({ transport, batchSize: 100, maxBatchSize: 100, prefetchAt: 0.5 });
    const ids = new Float64Array(150);
    expect(c.tryNextNumbers('t', ids)).toBe(0); // empty: a fetch starts
    await settle();
    expect(c.tryNextNumbers('t', ids)).toBe(100); // the block buffered; emptying it starts the next fetch
    await settle();
    expect(c.tryNextNumbers('t', ids, 100)).toBe(50); // the next block, from where the array was left
    expect(Array.from(ids.subarray(0, 101))).toEqual([...Array.from({ length: 100 }, (_, i) => i + 1), 111]);
    expectNoDuplicates(ids);
    expect(ids).toHaveLength(150);
    const plain: number[] = [];
    expect(c.tag('t').tryNextNumbers(plain, 0, 10)).toBe(10);
    expect(plain[0]).toBe(ids[149]! + 1);
    expect(codeOf(() => c.tryNextNumbers('t', ids, 100, 51))).toBe('BAD_REQUEST');
    expect(codeOf(() => c.tryNextNumbers('t', ids, -1))).toBe('BAD_REQUEST');
    // A Snowflake ID above 2^53 - 1 is refused and stays buffered for next().
    c.tryNextNumbers('flake', ids);
    await settle();
    expect(codeOf(() => c.tryNextNumbers('flake', ids))).toBe('BAD_REQUEST');
    expect(await c.next('flake')).toBe(9007199254740993n);
    await c.close();
  });
});

describe('client: the event loop', () => {
  // Issue 40: answers from the buffer resolve as microtasks, so a loop of `await next()` never let
  // the event loop in, and the SDK's own fetches (a Kafka consumer's commits) waited until every
  // such loop in the process had emptied its buffer.
  it.each(['next', 'nextNumber'] as const)('a loop of `await %s()` lets the event loop in every YIELD_EVERY IDs answered from memory', async (call) => {
    const t = new FakeTransport();
    const c = createIdmintClient({ transport: t, batchSize: 10_000, maxBatchSize: 10_000 });
    await c[call]('order');
    let turns = 0;
    let looping = true;
    const turn = (): void => {
      turns++;
      if (looping) setImmediate(turn);
    };
    setImmediate(turn);
    for (let i = 0; i < 3 * YIELD_EVERY; i++) await c[call]('order');
    looping = false;
    expect(turns).toBeGreaterThanOrEqual(2);
    await c.close();
  });
});
