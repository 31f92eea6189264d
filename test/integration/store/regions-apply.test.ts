import { afterAll, describe, expect, it } from 'vitest';
import { regionLayout, regionOf } from '../../../src/core/region.js';
import { applyRegions, planRegions } from '../../../src/regions/apply.js';
import { holdRegionRecord } from '../../../src/store/region-record.js';
import { freshStore, type TestStore } from '../../support/store.js';
import { expectNoDuplicates } from '../../support/unique.js';

// One region becomes three while region 0 keeps allocating: every ID handed out before, during
// and after, in every region, is unique.
describe('idmint regions apply (real Postgres)', () => {
  const stores: TestStore[] = [];
  afterAll(async () => {
    for (const s of stores) await s.close();
  });
  const layout = { regions: 3, stripe: 5000 };

  it('under load in region 0: floors taken after every running allocation, the new regions above them, zero duplicates; a second run changes nothing', async () => {
    const [zero, one, two] = [await freshStore('ra0'), await freshStore('ra1'), await freshStore('ra2')];
    stores.push(zero, one, two);
    await zero.store.createBiz({ bizTag: 'order', step: 700 });
    await zero.store.createBiz({ bizTag: 'sharded', mode: 'sharded', shards: 4, step: 300 });
    await zero.store.createBiz({ bizTag: 'flakes', mode: 'snowflake' });
    await zero.store.createBiz({ bizTag: 'unused', step: 10 });
    const ids = new Map<string, Array<{ region: number; shard: number; start: number; end: number }>>([
      ['order', []],
      ['sharded', []],
    ]);
    // Eight allocators in region 0 all along: before the row, while the floors are taken, after.
    let running = true;
    const allocate = async (store: TestStore, region: number, w: number): Promise<void> => {
      for (let i = 0; running; i++) {
        const bizTag = i % 3 === 0 ? 'sharded' : 'order';
        const shard = bizTag === 'sharded' ? (i + w) % 4 : 0;
        const seg = await store.store.allocate(bizTag, 50 + ((i * 97 + w * 13) % 900), { shard });
        ids.get(bizTag)!.push({ region, shard, start: seg.start, end: seg.end });
      }
    };
    const load = Array.from({ length: 8 }, (_, w) => allocate(zero, 0, w));
    await new Promise((r) => setTimeout(r, 300));

    const plan = await planRegions(zero.db, [one.db, two.db], layout);
    expect(plan.ok).toBe(true);
    expect(plan.source).toMatchObject({ record: 'record', floors: 'to take', tags: 4 });
    expect(plan.targets.map((t) => t.tags.map((x) => x.action))).toEqual([
      ['create', 'create', 'create', 'create'],
      ['create', 'create', 'create', 'create'],
    ]);
    const lines: string[] = [];
    const applied = await applyRegions(zero.db, [one.db, two.db], layout, (l) => lines.push(l));
    expect(lines[0]).toBe('region 0: recorded, floors taken');
    const floors = new Map(applied.targets[0]!.tags.map((t) => [t.bizTag, t.floor]));
    expect(floors.get('order')).toBeGreaterThan(0);
    expect(floors.get('flakes')).toBe(0);

    // The new regions serve while region 0 goes on.
    const after = [1, 2].flatMap((region) => Array.from({ length: 4 }, (_, w) => allocate([one, two][region - 1]!, region, w)));
    await new Promise((r) => setTimeout(r, 1500));
    running = false;
    await Promise.all([...load, ...after]);

    for (const [bizTag, segments] of ids) {
      const all: string[] = [];
      for (const seg of segments) {
        // Past the floor, every segment lies in its own region's stripes.
        if (seg.end > floors.get(bizTag)! || seg.region > 0) expect(regionOf(seg.start, layout), `${bizTag} ${JSON.stringify(seg)}`).toBe(seg.region);
        if (seg.region > 0) expect(seg.start).toBeGreaterThan(floors.get(bizTag)!);
        // A sharded tag counts per shard (its IDs carry the shard): unique per (shard, sequence).
        for (let id = seg.start; id <= seg.end; id++) all.push(`${seg.shard}:${id}`);
      }
      expectNoDuplicates(all);
      expect(segments.filter((s) => s.region === 0).length).toBeGreaterThan(10);
      expect(segments.filter((s) => s.region === 2).length).toBeGreaterThan(2);
    }

    // Again: idempotent. The floors are those of the first run; nothing is created or raised.
    const again = await applyRegions(zero.db, [one.db, two.db], layout, () => undefined);
    expect(again.source).toMatchObject({ record: 'recorded', floors: 'taken' });
    expect(again.targets.flatMap((t) => t.tags.map((x) => x.action))).toEqual(Array(8).fill('unchanged'));
    expect(new Map(again.targets[0]!.tags.map((t) => [t.bizTag, t.floor]))).toEqual(floors);
    // Each database now holds its region: a process with the right settings starts.
    expect(await holdRegionRecord(two.db, regionLayout(3, 2, 5000), 'test')).toEqual({ regions: 3, region: 2, stripe: 5000 });
    await expect(holdRegionRecord(zero.db, undefined, 'test')).rejects.toThrow(/one of several regions/);
  });

  it('refuses, changing nothing, a new region that already handed out IDs, a tag defined otherwise, or a source that is another region', async () => {
    const [zero, used, other] = [await freshStore('rb0'), await freshStore('rb1'), await freshStore('rb2')];
    stores.push(zero, used, other);
    await zero.store.createBiz({ bizTag: 'order', step: 100 });
    await zero.store.allocate('order', 100);
    await used.store.createBiz({ bizTag: 'order', step: 100 });
    await used.store.allocate('order', 100);
    const plan = await planRegions(zero.db, [used.db], { regions: 2, stripe: 1000 });
    expect(plan.ok).toBe(false);
    expect(plan.targets[0]!.reason).toMatch(/handed out IDs without being a region/);
    await expect(applyRegions(zero.db, [used.db], { regions: 2, stripe: 1000 })).rejects.toThrow(/refusals/);
    expect((await zero.db.query('SELECT 1 FROM idmint_region')).rows).toEqual([]);

    await other.store.createBiz({ bizTag: 'order', mode: 'snowflake' });
    const conflict = await planRegions(zero.db, [other.db], { regions: 2, stripe: 1000 });
    expect(conflict.targets[0]!.tags[0]).toMatchObject({
      action: 'refuse',
      reason: expect.stringMatching(/definition differs from region 0's \(mode snowflake\/segment/),
    });

    await holdRegionRecord(other.db, regionLayout(2, 1, 1000), 'test');
    await expect(planRegions(other.db, [zero.db], { regions: 2, stripe: 1000 })).rejects.toThrow(/the source database is already region 1 of 2/);
  });
});
