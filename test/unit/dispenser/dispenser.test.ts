import { describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { IdmintError, SegmentExhaustedError, notReady } from '../../../src/core/errors.js';
import type { BizStore, BizTag, BizTagInput, IdSource, IdSourceName, Segment } from '../../../src/core/ports.js';
import { Dispenser, MAX_REMEMBERED_MISSES, type DispenserPlugin } from '../../../src/dispenser/dispenser.js';
import { DispenserMetrics } from '../../../src/dispenser/metrics.js';
import { TagCache } from '../../../src/dispenser/tag-cache.js';
import { expectNoDuplicates } from '../../support/unique.js';
import { testTag } from '../../support/tags.js';
import { SteppingClock } from '../core/helpers.js';

// Pure dispenser logic over in-process implementations of our own interfaces; the real
// store and pools are exercised by the integration and e2e suites.

const tag = (bizTag: string, overrides: Partial<BizTag> = {}): BizTag => testTag(bizTag, { step: 100, ...overrides });

class TagTable implements BizStore {
  readonly tags = new Map<string, BizTag>();
  lookups = 0;
  constructor(...tags: BizTag[]) {
    for (const t of tags) this.tags.set(t.bizTag, t);
  }
  async createBiz(input: BizTagInput): Promise<BizTag> {
    const t = tag(input.bizTag);
    this.tags.set(t.bizTag, t);
    return t;
  }
  async getBiz(bizTag: string): Promise<BizTag | null> {
    this.lookups++;
    return this.tags.get(bizTag) ?? null;
  }
  async listBiz(): Promise<BizTag[]> {
    return [...this.tags.values()];
  }
  async updateBiz(bizTag: string): Promise<BizTag> {
    return this.tags.get(bizTag)!;
  }
  async deleteBiz(bizTag: string): Promise<void> {
    this.tags.delete(bizTag);
  }
  async allocate(bizTag: string, step: number): Promise<Segment> {
    return { bizTag, shard: 0, start: 1, end: step };
  }
  async close(): Promise<void> {}
}

/** A source that serves from a counter, optionally short or failing. */
class CounterSource implements IdSource {
  next: bigint;
  limit = Infinity;
  failWith: IdmintError | undefined;
  constructor(
    readonly name: IdSourceName,
    start: bigint,
  ) {
    this.next = start;
  }
  async take(_tag: BizTag, count: number): Promise<string[]> {
    if (this.failWith) throw this.failWith;
    const n = Math.min(count, this.limit);
    this.limit -= n;
    return Array.from({ length: n }, () => (this.next++).toString());
  }
}

function setup(tags: BizTag[] = [tag('order')], options: { poolWaitMs?: number } = {}) {
  const store = new TagTable(...tags);
  const pool = new CounterSource('pool', 1n);
  const segment = new CounterSource('segment', 1_000_000n);
  const snowflake = new CounterSource('snowflake', 1n << 53n);
  const metrics = new DispenserMetrics(new Registry());
  // The dispenser's time: its waits step it, so no test here waits on (or races) real time.
  const clock = new SteppingClock(Date.UTC(2026, 0, 1));
  const dispenser = new Dispenser({ store, pools: { memory: pool }, segment, snowflake, metrics, poolWaitMs: options.poolWaitMs ?? 50, clock });
  return { store, pool, segment, snowflake, metrics, dispenser, clock };
}

describe('Dispenser', () => {
  it('serves a segment tag from its pool', async () => {
    const { dispenser } = setup();
    await expect(dispenser.get('order', 3)).resolves.toEqual({ bizTag: 'order', ids: ['1', '2', '3'], source: 'pool' });
  });

  it('rejects bad tags and counts with BAD_REQUEST naming the field', async () => {
    const { dispenser } = setup();
    await expect(dispenser.get('Order!', 1)).rejects.toMatchObject({ code: 'BAD_REQUEST', details: { field: 'bizTag' } });
    for (const count of [0, -1, 1.5, 10_001, Number.NaN]) {
      await expect(dispenser.get('order', count)).rejects.toMatchObject({ code: 'BAD_REQUEST', details: { field: 'count' } });
    }
  });

  it('answers UNKNOWN_BIZ_TAG for a tag that does not exist', async () => {
    const { dispenser } = setup();
    await expect(dispenser.get('nope', 1)).rejects.toMatchObject({ code: 'UNKNOWN_BIZ_TAG' });
  });

  it('completes a short pool batch from the segment fallback and reports it', async () => {
    const { dispenser, pool } = setup();
    pool.limit = 2;
    const result = await dispenser.get('order', 5);
    expect(result.ids).toEqual(['1', '2', '1000000', '1000001', '1000002']);
    expect(result.source).toBe('segment');
  });

  it('fallback snowflake: a pool that cannot serve goes to a segment from Postgres first, and to Snowflake only when Postgres cannot serve either', async () => {
    const { dispenser, pool, segment } = setup([tag('order', { fallback: 'snowflake' })]);
    pool.failWith = notReady('redis', new Error('ECONNREFUSED'));
    expect((await dispenser.get('order', 2)).source).toBe('segment');
    segment.failWith = notReady('postgres', new Error('ECONNREFUSED'));
    const result = await dispenser.get('order', 2);
    expect(result.source).toBe('snowflake');
    expect(result.ids.every((id) => BigInt(id) >= 1n << 53n)).toBe(true);
  });

  it('blocks never come from Snowflake: with the pool and Postgres down they answer NOT_READY, while lists still serve Snowflake (found by the chaos run: rounded 63-bit blocks repeated IDs)', async () => {
    const { dispenser, pool, segment, snowflake } = setup([tag('order', { fallback: 'snowflake' })]);
    snowflake.next = 2124792667136082001n; // a real Snowflake ID: above 2^53, where numbers round
    pool.failWith = notReady('redis', new Error('ECONNREFUSED'));
    segment.failWith = notReady('postgres', new Error('ECONNREFUSED'));
    await expect(dispenser.getBlocks('order', 4)).rejects.toMatchObject({ code: 'NOT_READY' });
    const listed = await dispenser.get('order', 4);
    expect(listed.source).toBe('snowflake');
    expectNoDuplicates(listed.ids);
    expect(listed.ids).toHaveLength(4);
    expect(listed.ids[0]).toBe('2124792667136082001');
  });

  it('a pool merely short goes to a segment, not to Snowflake, while Postgres serves', async () => {
    const { dispenser, pool } = setup([tag('order', { fallback: 'snowflake' })]);
    pool.limit = 3;
    const result = await dispenser.get('order', 10);
    expect(result.source).toBe('segment');
    expect(result.ids).toHaveLength(10);
  });

  it('getBlocks: segment tags only, blocks adding up to count', async () => {
    const { dispenser } = setup([tag('order'), tag('flake', { mode: 'snowflake' })]);
    const result = await dispenser.getBlocks('order', 5);
    expect(result.blocks.reduce((n, b) => n + b.end - b.start + 1, 0)).toBe(5);
    await expect(dispenser.getBlocks('flake', 5)).rejects.toMatchObject({ code: 'BAD_REQUEST', message: expect.stringMatching(/blocks are for segment tags/) });
  });

  it('refuses with POOL_EMPTY when the fallback policy is error', async () => {
    const { dispenser, pool } = setup([tag('order', { fallback: 'error' })]);
    pool.limit = 0;
    await expect(dispenser.get('order', 1)).rejects.toMatchObject({ code: 'POOL_EMPTY' });
  });

  it('fallback error: a pool that answers but is short is waited for (the first refill of a new tag), and serves the whole batch from the pool', async () => {
    const { dispenser, pool, segment, clock } = setup([tag('order', { fallback: 'error' })]);
    // The refill lands 20 ms (of the dispenser's clock) after the first short take.
    const refillAfter = (ms: number): void => {
      const at = clock.ms + ms;
      clock.onWait = (now) => void (now >= at && (pool.limit = Infinity));
    };
    pool.limit = 2;
    refillAfter(20);
    const listed = await dispenser.get('order', 5);
    expect(listed).toEqual({ bizTag: 'order', ids: ['1', '2', '3', '4', '5'], source: 'pool' });
    pool.limit = 0;
    refillAfter(20);
    const blocks = await dispenser.getBlocks('order', 4);
    expect(blocks.source).toBe('pool');
    expect(blocks.blocks.reduce((n, b) => n + b.end - b.start + 1, 0)).toBe(4);
    expect(segment.next).toBe(1_000_000n); // the segment rung was never asked
  });

  it('fallback error: the wait for a short pool ends at poolWaitMs by the injected clock, not by real time (issue 42)', async () => {
    // A minute by the dispenser's clock, none by the wall's: a real wait would outlast the test's timeout.
    const { dispenser, pool, clock } = setup([tag('order', { fallback: 'error' })], { poolWaitMs: 60_000 });
    pool.limit = 0;
    const startedAt = clock.ms;
    await expect(dispenser.get('order', 1)).rejects.toMatchObject({ code: 'POOL_EMPTY' });
    expect(clock.ms - startedAt).toBeGreaterThan(59_000);
    expect(clock.ms - startedAt).toBeLessThanOrEqual(60_000);
    expect(Math.max(...clock.waits)).toBe(200);
  });

  it('keeps the pool failure as the error when the policy is error', async () => {
    const { dispenser, pool } = setup([tag('order', { fallback: 'error' })]);
    pool.failWith = notReady('redis', new Error('down'));
    await expect(dispenser.get('order', 1)).rejects.toMatchObject({ code: 'NOT_READY' });
  });

  it('never falls back past a hard limit', async () => {
    const { dispenser, pool } = setup([tag('order', { fallback: 'snowflake' })]);
    pool.failWith = new SegmentExhaustedError('order', 100);
    await expect(dispenser.get('order', 1)).rejects.toMatchObject({ code: 'SEGMENT_EXHAUSTED' });
  });

  it('serves snowflake-mode tags from the Snowflake source', async () => {
    const { dispenser } = setup([tag('trace', { mode: 'snowflake' })]);
    await expect(dispenser.get('trace', 1)).resolves.toMatchObject({ source: 'snowflake' });
  });

  it('says NOT_READY for a mode this process has no generator for', async () => {
    const { dispenser } = setup([tag('u', { mode: 'uid' })]);
    await expect(dispenser.get('u', 1)).rejects.toMatchObject({ code: 'NOT_READY' });
  });

  it('runs plugins in order: before may veto, after sees the IDs, onError sees failures', async () => {
    const seen: string[] = [];
    const plugins: DispenserPlugin[] = [
      {
        name: 'a',
        before: (r) => void seen.push(`a.before:${r.bizTag}`),
        after: (_r, res) => void seen.push(`a.after:${'ids' in res ? res.ids.length : res.blocks.length}`),
      },
      {
        name: 'gate',
        before: (r) => {
          if (r.count > 10) throw new IdmintError('BAD_REQUEST', 'too many for this caller');
        },
        onError: (_r, e) => void seen.push(`gate.onError:${e.code}`),
      },
    ];
    const store = new TagTable(tag('order'));
    const dispenser = new Dispenser({ store, pools: { memory: new CounterSource('pool', 1n) }, plugins });
    await dispenser.get('order', 2);
    await expect(dispenser.get('order', 11)).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    expect(seen).toEqual(['a.before:order', 'a.after:2', 'a.before:order', 'gate.onError:BAD_REQUEST']);
  });

  it('lets a rejection handler answer instead of failing', async () => {
    const store = new TagTable(tag('order', { fallback: 'error' }));
    const pool = new CounterSource('pool', 1n);
    pool.limit = 0;
    const dispenser = new Dispenser({
      store,
      pools: { memory: pool },
      poolWaitMs: 0,
      onRejected: (request, error) => (error.code === 'POOL_EMPTY' ? { bizTag: request.bizTag, ids: [], source: 'pool' } : undefined),
    });
    await expect(dispenser.get('order', 1)).resolves.toEqual({ bizTag: 'order', ids: [], source: 'pool' });
  });

  it('one request path: a plugin veto, an internal error and a rejection handler treat a blocks request as a list request', async () => {
    const seen: string[] = [];
    const store = new TagTable(tag('order'));
    const pool = new CounterSource('pool', 1n);
    const metrics = new DispenserMetrics(new Registry());
    const plugins: DispenserPlugin[] = [
      {
        name: 'gate',
        before: (r) => {
          seen.push(`before:${r.as}`);
          if (r.count > 10) throw new IdmintError('BAD_REQUEST', 'too many for this caller');
        },
        after: (r) => void seen.push(`after:${r.as}`),
        onError: (r, e) => void seen.push(`onError:${r.as}:${e.code}`),
      },
    ];
    const dispenser = new Dispenser({ store, pools: { memory: pool }, plugins, metrics, poolWaitMs: 0 });
    for (const ask of [(n: number) => dispenser.get('order', n), (n: number) => dispenser.getBlocks('order', n)]) {
      await ask(2);
      await expect(ask(11)).rejects.toMatchObject({ code: 'BAD_REQUEST', message: 'too many for this caller' });
    }
    expect(seen).toEqual([
      'before:ids',
      'after:ids',
      'before:ids',
      'onError:ids:BAD_REQUEST',
      'before:blocks',
      'after:blocks',
      'before:blocks',
      'onError:blocks:BAD_REQUEST',
    ]);
    // An internal fault in the pool: the same NOT_READY, logged cause hidden from the caller, counted.
    pool.failWith = new TypeError('boom') as unknown as IdmintError;
    const strict = new Dispenser({ store: new TagTable(tag('order', { fallback: 'error' })), pools: { memory: pool }, metrics, poolWaitMs: 0 });
    const listed = await strict.get('order', 1).catch((e: unknown) => e);
    const blocked = await strict.getBlocks('order', 1).catch((e: unknown) => e);
    expect(listed).toMatchObject({ code: 'NOT_READY', message: 'internal fault while dispensing; the server logged the details' });
    expect(blocked).toMatchObject({ code: 'NOT_READY', message: 'internal fault while dispensing; the server logged the details' });
    expect(await metrics.registry.metrics()).toMatch(/idmint_errors_total\{code="BAD_REQUEST"\} 2/);
    expect(await metrics.registry.metrics()).toMatch(/idmint_errors_total\{code="NOT_READY"\} 2/);
    // A rejection handler answering with IDs answers a blocks request with them as blocks.
    const rescued = new Dispenser({
      store: new TagTable(tag('order', { fallback: 'error' })),
      pools: { memory: pool },
      poolWaitMs: 0,
      onRejected: (request) => ({ bizTag: request.bizTag, ids: ['7', '8', '9'], source: 'pool' }),
    });
    await expect(rescued.getBlocks('order', 3)).resolves.toEqual({ bizTag: 'order', blocks: [{ start: 7, end: 9 }], source: 'pool' });
  });

  it('trusts a tag for tagCacheMs on its clock: past half of it one reload runs behind the requests, past all of it requests wait for the reload', async () => {
    let now = 1_000_000;
    const store = new TagTable(tag('order'));
    const dispenser = new Dispenser({ store, pools: { memory: new CounterSource('pool', 1n) }, tagCacheMs: 500, clock: { now: () => now } });
    await dispenser.get('order', 1);
    now += 249;
    await dispenser.get('order', 1);
    expect(store.lookups).toBe(1);
    now += 1;
    // Half the bound: answered from the settings at once, while one reload runs behind.
    await expect(dispenser.get('order', 1)).resolves.toMatchObject({ source: 'pool' });
    await new Promise((r) => setImmediate(r));
    expect(store.lookups).toBe(2);
    // Deleted elsewhere, then idle past the bound: the next request waits for the reload and is refused.
    store.tags.delete('order');
    now += 500;
    await expect(dispenser.get('order', 1)).rejects.toMatchObject({ code: 'UNKNOWN_BIZ_TAG' });
    expect(store.lookups).toBe(3);
  });

  it('stamps a tag listing with the injected clock: the listed settings go stale by that clock, not by the wall (issue 46)', async () => {
    // Months before the wall clock: a listing stamped by Date.now() would look fresh to this clock for months.
    const clock = new SteppingClock(Date.UTC(2026, 0, 1));
    const store = new TagTable(tag('order'));
    const dispenser = new Dispenser({ store, pools: { memory: new CounterSource('pool', 1n) }, tagCacheMs: 500, clock });
    const cache = new TagCache({ store, ttlMs: 500, clock });
    await expect(dispenser.preloadTags()).resolves.toBe(1);
    expect(cache.preload(await store.listBiz())).toBe(1);
    await dispenser.get('order', 1);
    expect(await cache.get('order')).toMatchObject({ bizTag: 'order' });
    expect(store.lookups).toBe(0);
    // Older than the bound by the clock: the next lookup waits for a reload and sees the tag gone.
    store.tags.delete('order');
    await clock.sleep(501);
    await expect(dispenser.get('order', 1)).rejects.toMatchObject({ code: 'UNKNOWN_BIZ_TAG' });
    expect(await cache.get('order')).toBeNull();
    expect(store.lookups).toBe(2);
  });

  it('a change made in this process (invalidate) is never overwritten by a reload that started before it', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const store = new TagTable(tag('order', { step: 100 }));
    const slow = store.getBiz.bind(store);
    store.getBiz = async (bizTag: string) => {
      const before = await slow(bizTag);
      await gate;
      return before;
    };
    let now = 0;
    const dispenser = new Dispenser({ store, pools: { memory: new CounterSource('pool', 1n) }, tagCacheMs: 10, clock: { now: () => now } });
    const first = dispenser.tag('order');
    release();
    expect((await first)?.step).toBe(100);
    now += 6;
    let hold!: () => void;
    const held = new Promise<void>((r) => (hold = r));
    store.getBiz = async (bizTag: string) => {
      const before = await slow(bizTag);
      await held;
      return before;
    };
    await dispenser.tag('order'); // within the bound; a reload reading step 100 is now in flight
    store.tags.set('order', tag('order', { step: 200 }));
    dispenser.invalidate('order');
    hold();
    await new Promise((r) => setImmediate(r));
    store.getBiz = slow;
    expect((await dispenser.tag('order'))?.step).toBe(200);
  });

  it('caches tag lookups briefly and reloads after invalidate', async () => {
    const { dispenser, store } = setup();
    await dispenser.get('order', 1);
    await dispenser.get('order', 1);
    expect(store.lookups).toBe(1);
    dispenser.invalidate('order');
    await dispenser.get('order', 1);
    expect(store.lookups).toBe(2);
  });

  it('counts issued IDs and errors in metrics', async () => {
    const { dispenser, metrics } = setup();
    await dispenser.get('order', 7);
    await expect(dispenser.get('nope', 1)).rejects.toThrow();
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/idmint_ids_issued_total\{biz_tag="order",source="pool"\} 7/);
    expect(text).toMatch(/idmint_errors_total\{code="UNKNOWN_BIZ_TAG"\} 1/);
    // Counted between reads, read by scrape and by get(): every count exactly once.
    await dispenser.get('order', 3);
    await dispenser.get('order', 1);
    expect(await metrics.registry.metrics()).toMatch(/idmint_ids_issued_total\{biz_tag="order",source="pool"\} 11/);
    await dispenser.get('order', 2);
    const values = (await metrics.issued.get()).values;
    expect(values.find((v) => v.labels.biz_tag === 'order')?.value).toBe(13);
    expect((await metrics.requests.get()).values.find((v) => v.labels.biz_tag === 'order')?.value).toBe(4);
    expect(await metrics.registry.metrics()).toMatch(/idmint_requests_total\{biz_tag="order",source="pool"\} 4/);
  });
});

describe('Dispenser tag cache', () => {
  it('remembers unknown names briefly and boundedly: endless made-up names cannot grow the heap', async () => {
    const { dispenser, store } = setup();
    for (let i = 0; i < MAX_REMEMBERED_MISSES + 5_000; i++) expect(await dispenser.tag(`made-up-${i}`)).toBeNull();
    expect(dispenser.cachedTagNames()).toBeLessThanOrEqual(MAX_REMEMBERED_MISSES + 1);
    // A burst of the same unknown name costs one lookup.
    const before = store.lookups;
    for (let i = 0; i < 100; i++) await dispenser.tag('nope');
    expect(store.lookups - before).toBe(1);
    // A tag created meanwhile is seen once its miss is invalidated (an admin change here) or expires.
    await store.createBiz({ bizTag: 'nope' });
    dispenser.invalidate('nope');
    expect(await dispenser.tag('nope')).toMatchObject({ bizTag: 'nope' });
  });

  it('a listed tag is served while the store is down, though this process never looked it up', async () => {
    const { dispenser, store } = setup([tag('order'), tag('unseen', { fallback: 'snowflake' })]);
    expect(await dispenser.preloadTags()).toBe(2);
    store.getBiz = async () => {
      throw notReady('postgres', new Error('ECONNREFUSED'));
    };
    expect((await dispenser.get('unseen', 3)).ids).toHaveLength(3);
    // What was looked up meanwhile is not overwritten by a later listing.
    expect(await dispenser.preloadTags()).toBe(0);
  });

  it('a listing that started before a change made here is not cached', async () => {
    const { dispenser } = setup([tag('order'), tag('late')]);
    const listing = dispenser.preloadTags();
    dispenser.invalidate('late');
    expect(await listing).toBe(0);
  });
});

describe('Dispenser in-flight bound', () => {
  it('refuses a request that would push the IDs being served past maxIdsInFlight, with a retriable NOT_READY', async () => {
    const store = new TagTable(tag('order'));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const slow: IdSource = {
      name: 'pool',
      take: async (_tag, count) => {
        await gate;
        return Array.from({ length: count }, (_, i) => String(i + 1));
      },
    };
    const dispenser = new Dispenser({ store, pools: { memory: slow }, maxCount: 1000, maxIdsInFlight: 1500 });
    const first = dispenser.get('order', 1000);
    await new Promise((r) => setImmediate(r));
    await expect(dispenser.get('order', 1000)).rejects.toMatchObject({ code: 'NOT_READY', retriable: true, message: expect.stringMatching(/busy: 1000 IDs/) });
    release();
    await expect(first).resolves.toMatchObject({ ids: expect.any(Array) });
    // Served and released: the next request goes through.
    await expect(dispenser.get('order', 1000)).resolves.toMatchObject({ source: 'pool' });
  });
});
