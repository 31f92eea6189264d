import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DashboardReporter } from '../../../src/dashboard/reporter.js';
import { RedisDashboardStore } from '../../../src/dashboard/store.js';
import { env } from '../../support/env.js';
import { uid } from '../../support/names.js';

const REDIS_URL = env('REDIS_URL');

/** The dashboard's history in real Redis: shared by processes, bounded, one sample per interval. */
describe('RedisDashboardStore', () => {
  let a: Redis;
  let b: Redis;

  beforeAll(() => {
    a = new Redis(REDIS_URL);
    b = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    a?.disconnect();
    b?.disconnect();
  });

  it('keeps at most about its limit of samples and refills, and reads back what came after a time', async () => {
    const prefix = `t-${uid()}:`;
    const store = new RedisDashboardStore(a, { samples: 50, refills: 50 }, prefix);
    const now = Date.now();
    for (let i = 0; i < 400; i++) await store.addSample({ at: now - 400 + i, pools: [], issued: { t: { pool: i, segment: 0, snowflake: 0 } } });
    const kept = await store.samples(0);
    // MAXLEN ~ trims whole stream nodes: at least the limit, never much more.
    expect(kept.length).toBeGreaterThanOrEqual(50);
    expect(kept.length).toBeLessThan(250);
    expect(kept.at(-1)!.at).toBe(now - 1);
    expect((await store.samples(now - 4)).map((s) => s.at)).toEqual([now - 3, now - 2, now - 1]);
    // A writer whose clock runs behind Redis's by 30 s: its entries are still found by their own time.
    await store.addRefill({ at: now - 30_000, bizTag: 't', shard: 0, reason: 'cron', status: 'pushed', ms: 3, segments: 1, ids: 100, by: 'slow-clock' });
    expect((await store.refills(now - 31_000)).map((e) => e.by)).toEqual(['slow-clock']);
    expect(await store.refills(now - 29_000)).toEqual([]);
    await a.del(`${prefix}idmint:dashboard:samples`, `${prefix}idmint:dashboard:refills`);
  });

  it('keeps one report per process and skips an unreadable entry', async () => {
    const prefix = `t-${uid()}:`;
    const store = new RedisDashboardStore(a, { samples: 5, refills: 5 }, prefix);
    const report = { id: 'p1', host: 'h', pid: 1, roles: ['api'], version: 't', startedAt: 0, at: 1, status: 'ready' as const, checks: {}, issued: {} };
    await store.putReport(report);
    await store.putReport({ ...report, at: 2 });
    await a.hset(`${prefix}idmint:dashboard:reports`, 'broken', '{not json');
    expect(await store.reports()).toEqual([{ ...report, at: 2 }]);
    await store.dropReport('p1');
    expect(await store.reports()).toEqual([]);
    await a.del(`${prefix}idmint:dashboard:reports`);
  });

  it('two processes sampling every interval write one sample per interval between them', async () => {
    const prefix = `t-${uid()}:`;
    const sampleMs = 200;
    const reporters = [a, b].map(
      (client, i) =>
        new DashboardReporter({
          store: new RedisDashboardStore(client, { samples: 100, refills: 5 }, prefix),
          identity: { id: `p${i}`, host: 'h', pid: i, roles: ['api'], version: 't', startedAt: 0 },
          health: async () => ({ status: 'ready', checks: {} }),
          issued: () => ({ t: { pool: 1, segment: 0, snowflake: 0 } }),
          sampler: true,
          sampleMs,
        }),
    );
    const started = Date.now();
    for (const r of reporters) r.start();
    await new Promise((resolve) => setTimeout(resolve, 10 * sampleMs));
    for (const r of reporters) r.close();
    const store = new RedisDashboardStore(a, { samples: 100, refills: 5 }, prefix);
    const samples = await store.samples(0);
    const intervals = samples.map((s) => Math.floor(s.at / sampleMs));
    expect(new Set(intervals).size).toBe(intervals.length);
    expect(samples.length).toBeGreaterThanOrEqual(5);
    expect(samples.length).toBeLessThanOrEqual(Math.ceil((Date.now() - started) / sampleMs) + 1);
    // Both processes' IDs are in the later samples (each reported before the other sampled).
    expect(samples.at(-1)!.issued.t).toEqual({ pool: 2, segment: 0, snowflake: 0 });
    await a.del(`${prefix}idmint:dashboard:samples`, `${prefix}idmint:dashboard:reports`);
  });
});
