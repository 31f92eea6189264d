import { describe, expect, it } from 'vitest';
import { KafkaPoolReadError } from '../../../src/dashboard/pools.js';
import { DashboardReporter, type HealthReport } from '../../../src/dashboard/reporter.js';
import { recordingRefills } from '../../../src/dashboard/refill-log.js';
import { MemoryDashboardStore, type DashboardStore, type IssuedCounts, type ProcessReport } from '../../../src/dashboard/store.js';
import type { RefillProcessor } from '../../../src/refill/processor.js';

const SAMPLE_MS = 1000;

function reporter(
  store: DashboardStore,
  id: string,
  options: { sampler?: boolean; issued?: Record<string, IssuedCounts>; health?: () => Promise<HealthReport> } = {},
) {
  return new DashboardReporter({
    store,
    identity: { id, host: 'h', pid: 1, roles: ['api'], version: 't', startedAt: 0 },
    health: options.health ?? (async () => ({ status: 'ready', checks: { database: { ok: true } } })),
    issued: () => options.issued ?? {},
    pools: async () => [{ bizTag: 'orders', shard: 0, kind: 'redis-list', depth: 500, target: 1000, rate: 10 }],
    sampler: options.sampler ?? true,
    sampleMs: SAMPLE_MS,
  });
}

describe('MemoryDashboardStore', () => {
  it('keeps the newest samples and refills up to its limits, and hands out each interval once', async () => {
    const store = new MemoryDashboardStore({ samples: 3, refills: 2 });
    for (let at = 1; at <= 5; at++) await store.addSample({ at, pools: [], issued: {} });
    expect((await store.samples(0)).map((s) => s.at)).toEqual([3, 4, 5]);
    expect((await store.samples(4)).map((s) => s.at)).toEqual([5]);
    for (let at = 1; at <= 3; at++) await store.addRefill({ at, bizTag: 't', shard: 0, reason: 'cron', status: 'pushed', ms: 1, segments: 1, ids: 1, by: 'p' });
    expect((await store.refills(0)).map((e) => e.at)).toEqual([2, 3]);
    expect(await store.claimSample(1000, 2000)).toBe(true);
    expect(await store.claimSample(1000, 2000)).toBe(false);
    expect(await store.claimSample(2000, 2000)).toBe(true);
  });
});

describe('DashboardReporter', () => {
  it('writes its own report and, winning the interval, a sample with the pools and the IDs issued summed over live processes', async () => {
    const store = new MemoryDashboardStore({ samples: 10, refills: 10 });
    const other: ProcessReport = {
      id: 'other',
      host: 'h',
      pid: 2,
      roles: ['api'],
      version: 't',
      startedAt: 0,
      at: Date.now(),
      status: 'ready',
      checks: {},
      issued: { orders: { pool: 5, segment: 1, snowflake: 0 } },
    };
    const gone: ProcessReport = { ...other, id: 'gone', at: Date.now() - 60_000, issued: { orders: { pool: 1000, segment: 0, snowflake: 0 } } };
    await store.putReport(other);
    await store.putReport(gone);
    await reporter(store, 'me', { issued: { orders: { pool: 10, segment: 0, snowflake: 2 } } }).tick();
    const [sample] = await store.samples(0);
    expect(sample!.pools).toEqual([{ bizTag: 'orders', shard: 0, kind: 'redis-list', depth: 500, target: 1000, rate: 10 }]);
    // A process silent for more than three intervals no longer counts.
    expect(sample!.issued).toEqual({ orders: { pool: 15, segment: 1, snowflake: 2 } });
    expect((await store.reports()).map((r) => r.id).sort()).toEqual(['gone', 'me', 'other']);
  });

  it('writes no sample when another process has the interval, or when it is not a sampler', async () => {
    const store = new MemoryDashboardStore({ samples: 10, refills: 10 });
    await reporter(store, 'a').tick();
    await reporter(store, 'b').tick();
    await reporter(store, 'c', { sampler: false }).tick();
    expect(await store.samples(0)).toHaveLength(1);
    expect((await store.reports()).map((r) => r.id).sort()).toEqual(['a', 'b', 'c']);
  });

  it('reports a health check that throws as not ready, and survives a store that cannot be written', async () => {
    const failing = new (class extends MemoryDashboardStore {
      override async putReport(): Promise<void> {
        throw new Error('Redis down');
      }
    })({ samples: 1, refills: 1 });
    const r = reporter(failing, 'me', { health: async () => Promise.reject(new Error('boom')) });
    await expect(r.tick()).resolves.toBeUndefined();
    const report = await r.report();
    expect(report.status).toBe('not_ready');
    expect(report.checks.health).toEqual({ ok: false, message: 'boom' });
  });
});

describe('DashboardReporter: stopping, naming, hung servers', () => {
  it('writes a last report saying it stopped when closed, and nothing after it (the page shows it grey, not silent)', async () => {
    const store = new MemoryDashboardStore({ samples: 10, refills: 10 });
    const r = new DashboardReporter({
      store,
      identity: { id: 'vm:1', host: 'vm', pid: 1, roles: ['api'], version: 't', startedAt: 0 },
      address: () => '10.0.0.5:8081',
      health: async () => ({ status: 'ready', checks: {} }),
      issued: () => ({}),
      sampler: false,
      sampleMs: SAMPLE_MS,
    });
    r.start();
    await r.close();
    await r.tick();
    const [last] = await store.reports();
    expect(last).toMatchObject({ id: 'vm:1', address: '10.0.0.5:8081', stoppedAt: expect.any(Number) });
    await r.close();
    expect(await store.reports()).toHaveLength(1);
  });

  it('says Kafka is down only when Kafka itself cannot be read (not when the tag list or the pool meta fail)', async () => {
    let failure: Error = new Error('Postgres down');
    const r = new DashboardReporter({
      store: new MemoryDashboardStore({ samples: 1, refills: 1 }),
      identity: { id: 'vm:1', host: 'vm', pid: 1, roles: ['refill'], version: 't', startedAt: 0 },
      health: async () => ({ status: 'ready', checks: { redis: { ok: true } } }),
      issued: () => ({}),
      kafkaPools: async () => Promise.reject(failure),
      sampler: false,
      sampleMs: SAMPLE_MS,
    });
    await r.tick();
    await new Promise((resolve) => setImmediate(resolve));
    expect((await r.report()).checks.kafka).toBeUndefined();
    failure = new KafkaPoolReadError(new Error('Connection error: connect ECONNREFUSED 127.0.0.1:9092'));
    await r.tick();
    await new Promise((resolve) => setImmediate(resolve));
    expect((await r.report()).checks.kafka).toEqual({
      ok: false,
      message: 'the Kafka pool topics cannot be read: Connection error: connect ECONNREFUSED 127.0.0.1:9092',
    });
  });

  it('reports readiness checks that hang as not ready (a hung server must not hang the page)', async () => {
    const r = reporter(new MemoryDashboardStore({ samples: 1, refills: 1 }), 'me', { health: () => new Promise(() => undefined) });
    const report = await r.report();
    expect(report.status).toBe('not_ready');
    expect(report.checks.health?.message).toMatch(/did not complete within/);
  });
});

describe('recordingRefills', () => {
  const processor = (outcome: () => Promise<unknown>): RefillProcessor => ({
    process: async () => outcome() as ReturnType<RefillProcessor['process']>,
    refill: async () => Promise.reject(new Error('unused')),
    sweep: async () => ({ checked: 0, requested: [], removed: [] }),
  });

  it('puts each refill job on the timeline: pushed with its segments and IDs, skipped with why, failed with the error (and rethrows)', async () => {
    const store = new MemoryDashboardStore({ samples: 1, refills: 10 });
    const job = { name: 'refill', data: { bizTag: 'orders', shard: 1, reason: 'threshold' } };
    const pushed = recordingRefills(
      processor(async () => ({
        status: 'pushed',
        bizTag: 'orders',
        shard: 1,
        target: 3000,
        depthBefore: 10,
        segments: [
          { start: 1, end: 1000 },
          { start: 2001, end: 3000 },
        ],
      })),
      store,
      'p1',
    );
    await pushed.process(job);
    await recordingRefills(
      processor(async () => ({ status: 'skipped', bizTag: 'orders', shard: 1, why: 'pool above threshold' })),
      store,
      'p1',
    ).process(job);
    await expect(
      recordingRefills(
        processor(async () => Promise.reject(new Error('database down'))),
        store,
        'p1',
      ).process(job),
    ).rejects.toThrow('database down');
    await recordingRefills(
      processor(async () => ({ checked: 1, requested: [], removed: [] })),
      store,
      'p1',
    ).process({ name: 'sweep', data: {} });
    await new Promise((r) => setImmediate(r));
    const events = await store.refills(0);
    expect(events.map((e) => [e.status, e.reason, e.shard, e.segments, e.ids, e.why, e.by])).toEqual([
      ['pushed', 'threshold', 1, 2, 2000, undefined, 'p1'],
      ['skipped', 'threshold', 1, 0, 0, 'pool above threshold', 'p1'],
      ['failed', 'threshold', 1, 0, 0, 'database down', 'p1'],
    ]);
    expect(events[0]).toMatchObject({ target: 3000, depthBefore: 10 });
    expect(typeof pushed.sweep).toBe('function');
  });
});
