import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nextSegment, regionLayout, regionOf } from '../../../src/core/region.js';
import { createPgliteDatabase, migrate, PostgresBizStore } from '../../../src/store/index.js';
import { holdRegionRecord, readRegionRecord } from '../../../src/store/region-record.js';
import { freshStore, type TestStore } from '../../support/store.js';
import { expectNoDuplicates } from '../../support/unique.js';

// Two regions, each its own database (here: its own schema on the real Postgres), no
// coordination: the allocation SQL takes each region's segments from its own stripes.
describe('segments of several regions (real Postgres)', () => {
  const stores: TestStore[] = [];
  beforeAll(async () => {
    stores.push(await freshStore('reg0'), await freshStore('reg1'), await freshStore('reg2'));
  });
  afterAll(async () => {
    for (const s of stores) await s.close();
  });

  it('two regions allocating at once, 8 allocators each, steps of every size: disjoint, each segment one range inside its own stripes, as the model says', async () => {
    const [a, b] = stores as [TestStore, TestStore];
    const layouts = [regionLayout(2, 0, 1000), regionLayout(2, 1, 1000)];
    for (const [i, s] of [a, b].entries()) {
      expect(await holdRegionRecord(s.db, layouts[i], 'test')).toEqual(layouts[i]);
      await s.store.createBiz({ bizTag: 'order', step: 100 });
    }
    const segments: Array<{ region: number; start: number; end: number }> = [];
    await Promise.all(
      [a, b].flatMap((s, region) =>
        Array.from({ length: 8 }, async (_, w) => {
          for (let i = 0; i < 40; i++) {
            const seg = await s.store.allocate('order', 1 + ((i * 37 + w * 101) % 700), { by: `w${w}` });
            segments.push({ region, start: seg.start, end: seg.end });
          }
        }),
      ),
    );
    const ids: number[] = [];
    for (const seg of segments) {
      expect(Math.floor((seg.start - 1) / 1000), JSON.stringify(seg)).toBe(Math.floor((seg.end - 1) / 1000));
      expect(regionOf(seg.start, layouts[0]!)).toBe(seg.region);
      for (let id = seg.start; id <= seg.end; id++) ids.push(id);
    }
    expectNoDuplicates(ids.map(String));
    // The SQL is the model: replaying one region's ledger through nextSegment gives the same ranges.
    for (const [region, s] of [a, b].entries()) {
      const ledger = await s.ledger('order');
      let max = 0;
      for (const seg of ledger) {
        const model = nextSegment(max, seg.end - seg.start + 1, Number.MAX_SAFE_INTEGER, layouts[region]);
        expect(model?.start, `region ${region} after ${max}`).toBe(seg.start);
        max = seg.end;
      }
    }
  });

  it('maxLimit refuses rather than wraps: a region whose next stripe lies past the limit is exhausted', async () => {
    const [a] = stores as [TestStore];
    await a.store.createBiz({ bizTag: 'small', step: 600, maxLimit: 2500 });
    // Region 0 of 2, stripes of 1000: 1–1000 and 2001–2500 are its.
    const got = [];
    for (;;) {
      try {
        got.push(await a.store.allocate('small', 600));
      } catch (err) {
        expect((err as { code?: string }).code).toBe('SEGMENT_EXHAUSTED');
        break;
      }
    }
    expect(got.map((s) => [s.start, s.end])).toEqual([
      [1, 600],
      [601, 1000],
      [2001, 2500],
    ]);
  });

  it("a tag whose limit ends before this region's first stripe is refused at create and update, not exhausted at its first take", async () => {
    const [, b] = stores as [TestStore, TestStore];
    // Region 1 of 2, stripes of 1000: its first ID is 1001.
    await expect(b.store.createBiz({ bizTag: 'tiny', step: 10, maxLimit: 1000 })).rejects.toThrow(
      /maxLimit 1000 of "tiny" leaves region 1 of 2 no IDs: its first stripe starts at 1001 \(stripes of 1000\); give a maxLimit of at least 1001/,
    );
    await b.store.createBiz({ bizTag: 'tiny', step: 10, maxLimit: 1001 });
    expect(await b.store.allocate('tiny', 10)).toMatchObject({ start: 1001, end: 1001 });
    await expect(b.store.updateBiz('tiny', { maxLimit: 999 })).rejects.toThrow(/leaves region 1 of 2 no IDs/);
    expect((await b.store.getBiz('tiny'))?.maxLimit).toBe(1001);
    // Snowflake tags have no counter to limit.
    await b.store.createBiz({ bizTag: 'tiny-sf', mode: 'snowflake' });
  });

  it('a database holds the layout it recorded: unset, different, or a used single-region database each refused with one line', async () => {
    const [a, , c] = stores as [TestStore, TestStore, TestStore];
    await expect(holdRegionRecord(a.db, undefined, 'test')).rejects.toThrow(
      /this database is one of several regions \(IDMINT_REGION=0 IDMINT_REGIONS=2 IDMINT_REGION_STRIPE=1000, recorded .*\); start with those settings/,
    );
    await expect(holdRegionRecord(a.db, regionLayout(2, 1, 1000), 'test')).rejects.toThrow(
      /IDMINT_REGION=1 IDMINT_REGIONS=2 IDMINT_REGION_STRIPE=1000 differs from what this database recorded at its first start \(IDMINT_REGION=0 IDMINT_REGIONS=2/,
    );
    await expect(holdRegionRecord(a.db, regionLayout(3, 0, 1000), 'test')).rejects.toThrow(/differs/);
    await expect(holdRegionRecord(a.db, regionLayout(3, 0, 1000), 'test')).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    // A single-region database that handed out IDs does not become a region by a setting.
    await c.store.createBiz({ bizTag: 'old', step: 10 });
    await c.store.allocate('old', 10);
    expect(await holdRegionRecord(c.db, undefined, 'test')).toBeUndefined();
    await expect(holdRegionRecord(c.db, regionLayout(2, 1), 'test')).rejects.toThrow(
      /already handed out IDs as a single region; make it a region with `idmint regions apply`/,
    );
    expect(await readRegionRecord(c.db)).toBeUndefined();
    expect(await c.store.allocate('old', 10)).toMatchObject({ start: 11, end: 20 });
  });

  it('PGlite runs the same SQL: the embedded database can be a region too', async () => {
    const db = await createPgliteDatabase();
    try {
      await migrate(db);
      await holdRegionRecord(db, regionLayout(3, 2, 50), 'test');
      const store = new PostgresBizStore(db);
      await store.createBiz({ bizTag: 'e', step: 30 });
      const got = [];
      for (let i = 0; i < 4; i++) got.push(await store.allocate('e', 30));
      expect(got.map((s) => [s.start, s.end])).toEqual([
        [101, 130],
        [131, 150],
        [251, 280],
        [281, 300],
      ]);
    } finally {
      await db.close();
    }
  });
});
