import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { targetDepth } from '../../../src/refill/target.js';
import { collectRefillStats } from '../../../src/refill/stats.js';
import { SWEEP_SCHEDULER_ID } from '../../../src/refill/queue.js';
import { runTakers, startHarness, type Harness } from './helpers.js';
import { freshStore, type TestStore } from '../../support/store.js';
import { uid } from '../../support/names.js';
import { sleep, untilValue } from '../../support/poll.js';
import { env } from '../../support/env.js';

const REDIS_URL = env('REDIS_URL');

describe('refill triggers: threshold and cron (real Redis, Postgres, BullMQ)', () => {
  let store: TestStore | undefined;
  let harness: Harness | undefined;
  afterEach(async () => {
    await harness?.close();
    await store?.close();
    harness = undefined;
    store = undefined;
  });

  it('a take under the threshold enqueues one refill job per tag/shard, deduplicated', async () => {
    store = await freshStore();
    const tag = await store.store.createBiz({ bizTag: `thr-${uid()}`, step: 100 });
    harness = await startHarness({ redisUrl: REDIS_URL, store: store.store, worker: false });
    for (let i = 0; i < 5; i++) {
      expect(await harness.pool.take(tag, 10)).toEqual([]);
      await sleep(30); // past the pool's 20 ms debounce, so each take really asks
    }
    const h = harness;
    const jobs = await untilValue(
      'the refill job',
      () => h.queue.queue.getJobs(['waiting', 'prioritized', 'delayed', 'active']),
      (j) => j.length > 0,
    );
    // Deduplicated: the five asks made one job, and no other arrives later.
    await sleep(100);
    expect((await h.queue.queue.getJobs(['waiting', 'prioritized', 'delayed', 'active'])).length).toBe(jobs.length);
    expect(jobs.map((j) => [j.name, j.data])).toEqual([['refill', { bizTag: tag.bizTag, shard: 0, reason: 'threshold' }]]);
  });

  it('the cron sweep fires on its schedule and refills a tag under threshold', async () => {
    store = await freshStore();
    const tag = await store.store.createBiz({ bizTag: `cron-${uid()}`, step: 100 });
    harness = await startHarness({ redisUrl: REDIS_URL, store: store.store, processor: { minDepth: 500 } });
    await harness.queue.scheduleSweeps(300);
    const schedulers = await harness.queue.queue.getJobSchedulers();
    expect(schedulers.map((s) => [s.key, s.every])).toEqual([[SWEEP_SCHEDULER_ID, 300]]);

    const h = harness;
    await untilValue(
      'the sweep to fill the pool',
      () => h.pool.depth(tag.bizTag, 0),
      (depth) => depth >= 500,
    );
    // The pool fills before its job is marked completed: wait for the record (a loaded machine shows the gap).
    const done = await untilValue(
      'the sweep and its cron refill among the completed jobs',
      () => h.queue.queue.getJobs(['completed'], 0, 100),
      (jobs) => jobs.some((j) => j.name === 'sweep') && jobs.some((j) => j.name === 'refill' && (j.data as { reason: string }).reason === 'cron'),
    );
    // Nothing was taken, so no threshold job ever existed.
    expect(done.some((j) => j.name === 'refill' && (j.data as { reason: string }).reason === 'threshold')).toBe(false);
  });

  it('the sweep removes the pool of a deleted tag', async () => {
    store = await freshStore();
    const keep = await store.store.createBiz({ bizTag: `keep-${uid()}`, step: 100 });
    const gone = await store.store.createBiz({ bizTag: `gone-${uid()}`, step: 100, shards: 1 });
    harness = await startHarness({ redisUrl: REDIS_URL, store: store.store, worker: false, processor: { minDepth: 200 } });
    await harness.processor.refill(keep.bizTag, 0, 'manual');
    await harness.processor.refill(gone.bizTag, 0, 'manual');
    expect(await harness.redis.keys(`${harness.keyPrefix}idmint:{${gone.bizTag}}*`)).not.toEqual([]);

    await store.store.deleteBiz(gone.bizTag);
    const outcome = await harness.processor.sweep();
    expect(outcome.removed).toEqual([gone.bizTag]);
    expect(await harness.redis.keys(`${harness.keyPrefix}idmint:{${gone.bizTag}}*`)).toEqual([]);
    expect(await harness.pool.depth(keep.bizTag, 0)).toBeGreaterThanOrEqual(200);
    expect(await harness.meta.tracked()).toEqual([keep.bizTag]);
  });

  it('the target depth follows demand: rate × poolSeconds within bounds, and stats report it', async () => {
    expect(targetDepth(0, 100, { poolSeconds: 60, minDepth: 1000, maxDepth: 50_000 })).toBe(1000);
    expect(targetDepth(0, 5000, { poolSeconds: 60, minDepth: 1000, maxDepth: 50_000 })).toBe(5000);
    expect(targetDepth(100, 100, { poolSeconds: 60, minDepth: 1000, maxDepth: 50_000 })).toBe(6000);
    expect(targetDepth(10_000, 100, { poolSeconds: 60, minDepth: 1000, maxDepth: 50_000 })).toBe(50_000);

    store = await freshStore();
    const tag = await store.store.createBiz({ bizTag: `rate-${uid()}`, step: 100 });
    const registry = new Registry();
    harness = await startHarness({ redisUrl: REDIS_URL, store: store.store, processor: { minDepth: 1000, maxDepth: 1_000_000, poolSeconds: 60, registry } });
    await runTakers({ source: harness.pool, tag, total: 20_000, takers: 4, batch: 100 });
    // 20,000 IDs asked within one 10 s bucket: at least 2,000/s, so a 60 s target far above minDepth.
    const rate = await harness.meta.rate(tag.bizTag, 0);
    expect(rate).toBeGreaterThanOrEqual(2000);
    const rule = { poolSeconds: 60, minDepth: 1000, maxDepth: 1_000_000 };
    const before = targetDepth(await harness.meta.rate(tag.bizTag, 0), 100, rule);
    const outcome = await harness.processor.refill(tag.bizTag, 0, 'manual');
    const after = targetDepth(await harness.meta.rate(tag.bizTag, 0), 100, rule);
    expect(outcome.status).toBe('pushed');
    // With no takes meanwhile the observed rate only falls as time passes, so the target lies between.
    const target = outcome.status === 'pushed' ? outcome.target : -1;
    expect(target).toBeGreaterThanOrEqual(Math.min(before, after));
    expect(target).toBeLessThanOrEqual(Math.max(before, after));

    const stats = await collectRefillStats({ store: store.store, sinks: { 'redis-list': harness.pool }, meta: harness.meta, queue: harness.queue });
    expect(stats.pools).toHaveLength(1);
    expect(stats.pools[0]).toMatchObject({ bizTag: tag.bizTag, shard: 0, kind: 'redis-list' });
    expect(stats.pools[0]!.target).toBeGreaterThanOrEqual(120_000);
    expect(stats.queue).toHaveProperty('completed');
    const metrics = await registry.metrics();
    expect(metrics).toMatch(/idmint_refill_total\{biz_tag="rate-[a-z0-9]+",reason="manual",outcome="pushed"\} 1/);
    expect(metrics).toContain('idmint_refill_duration_seconds_bucket');
  });

  it('a counter pool (ranges) may grow past maxDepth up to maxRangeDepth, in segments up to maxRangeSegment; a list pool stays at maxDepth and maxSegment', async () => {
    for (const kind of ['redis-list', 'redis-counter'] as const) {
      store = await freshStore();
      const tag = await store.store.createBiz({ bizTag: `range-${uid()}`, step: 100, pool: kind });
      const processor = { minDepth: 1000, maxDepth: 10_000, maxRangeDepth: 100_000, poolSeconds: 60, maxSegment: 2_000, maxRangeSegment: 50_000 };
      harness = await startHarness({ redisUrl: REDIS_URL, store: store.store, kind, processor });
      // At least 2,000/s of demand: a 60 s target of 120,000+ before the caps.
      await runTakers({ source: harness.pool, tag, total: 20_000, takers: 4, batch: 100 });
      // The worker's threshold refills ran during the takes and may have filled the pool to its
      // target already (then the manual refill has nothing to push): stop it and empty the pool.
      await harness.worker?.close();
      for (let depth = await harness.pool.depth(tag.bizTag, 0); depth > 0; depth = await harness.pool.depth(tag.bizTag, 0)) {
        await harness.pool.take(tag, Math.min(depth, 5_000));
      }
      const outcome = await harness.processor.refill(tag.bizTag, 0, 'manual');
      expect(outcome.status).toBe('pushed');
      expect(outcome.status === 'pushed' ? outcome.target : -1).toBe(kind === 'redis-counter' ? 100_000 : 10_000);
      const sizes = outcome.status === 'pushed' ? outcome.segments.map((g) => g.end - g.start + 1) : [];
      expect(Math.max(...sizes)).toBe(kind === 'redis-counter' ? 50_000 : 2_000);
      await harness.close();
      await store.close();
      harness = undefined;
      store = undefined;
    }
  });

  it('demand recorded from outside Redis scripts (Kafka pools) counts toward the rate', async () => {
    store = await freshStore();
    harness = await startHarness({ redisUrl: REDIS_URL, store: store.store, worker: false });
    const bizTag = `kafka-${uid()}`;
    expect(await harness.meta.rate(bizTag, 0)).toBe(0);
    await harness.meta.record(bizTag, 0, 5000);
    expect(await harness.meta.rate(bizTag, 0)).toBeGreaterThanOrEqual(5000 / 20);
    await expect(harness.meta.record(bizTag, 0, 0)).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });

  it('a tag at its max_limit: the pool gets IDs up to the limit, never past it, and the job fails without retries', async () => {
    store = await freshStore();
    const tag = await store.store.createBiz({ bizTag: `lim-${uid()}`, step: 100, maxLimit: 250 });
    harness = await startHarness({ redisUrl: REDIS_URL, store: store.store, processor: { minDepth: 1000 } });
    await harness.queue.requestRefill(tag.bizTag, 0, 'manual');
    const h = harness;
    const failed = await untilValue(
      'the refill job to fail',
      () => h.queue.queue.getJobs(['failed']),
      (f) => f.length > 0,
    );
    expect(failed).toHaveLength(1);
    expect(failed[0]!.failedReason).toContain('SEGMENT_EXHAUSTED');
    expect(failed[0]!.attemptsMade).toBe(1);
    const ids = await harness.pool.take(tag, 1000);
    expect(ids.map(Number)).toEqual(Array.from({ length: 250 }, (_, i) => i + 1));
  });
});
