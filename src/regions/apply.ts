/**
 * From one region to several (`idmint regions plan|apply`): the database that served alone
 * becomes region 0, and each other region's database starts every tag above the counter region 0
 * had reached. Why no ID repeats:
 *
 * 1. In one transaction under `LOCK TABLE idmint_segment IN SHARE ROW EXCLUSIVE MODE` (it waits
 *    for every allocation still running and holds new ones): region 0 records its layout and puts
 *    it on every counter row, and each tag's counter is kept as its floor (idmint_region_floor).
 *    Every ID region 0 handed out as a single region is at or below its tag's floor.
 * 2. An allocation after that finds the layout on the row it updates (one that waited for the row
 *    re-reads it) and takes region 0's stripes only (store/biz-store.ts).
 * 3. Each other region (fresh, or applied before) records its layout and raises every tag to the
 *    floor (startAfter): its stripes start above it. A region that already handed out a tag's IDs
 *    below the floor is refused: those may be region 0's.
 *
 * Idempotent: the floors are taken once; a second run finds every row and floor in place.
 */
import { BadRequestError, IdmintError } from '../core/errors.js';
import { hasCounter } from '../core/ports.js';
import type { RegionLayout } from '../core/region.js';
import { PostgresBizStore } from '../store/biz-store.js';
import type { Database } from '../store/db.js';
import { lockCounters, readRegionRecord, recordRegion, regionFloors, tagCounters, takeRegionFloors } from '../store/region-record.js';

export interface TagStep {
  bizTag: string;
  action: 'create' | 'raise' | 'unchanged' | 'refuse';
  /** The tag's floor from region 0: the region's next ID of it is above this. */
  floor: number;
  reason?: string;
}

export interface RegionStep {
  region: number;
  /** `record`: the row is written; `recorded`: already there, the same; `refuse`: see reason. */
  record: 'record' | 'recorded' | 'refuse';
  reason?: string;
  tags: TagStep[];
}

export interface RegionsPlan {
  regions: number;
  stripe: number;
  source: { record: 'record' | 'recorded'; floors: 'taken' | 'to take'; tags: number };
  targets: RegionStep[];
  /** Whether every step can be applied. */
  ok: boolean;
}

type Layout = Pick<RegionLayout, 'regions' | 'stripe'>;
const same = (a: RegionLayout | undefined, b: RegionLayout): boolean =>
  a !== undefined && a.regions === b.regions && a.region === b.region && a.stripe === b.stripe;

/** What `apply` would do; changes nothing. `targets[i]` is the database of region i + 1. */
export async function planRegions(source: Database, targets: readonly Database[], layout: Layout): Promise<RegionsPlan> {
  if (targets.length === 0 || targets.length > layout.regions - 1) {
    throw new BadRequestError(`name 1 to ${layout.regions - 1} databases of the other regions (regions 1, 2, … in order), got ${targets.length}`, 'to');
  }
  const zero = { ...layout, region: 0 };
  const recorded = await readRegionRecord(source);
  if (recorded && !same(recorded, zero)) {
    throw new IdmintError(
      'BAD_REQUEST',
      `the source database is already region ${recorded.region} of ${recorded.regions} (stripe ${recorded.stripe}), not region 0 of ${layout.regions} (stripe ${layout.stripe})`,
    );
  }
  const { floors, taken } = await regionFloors(source);
  const sourceTags = await new PostgresBizStore(source).listBiz();
  const plan: RegionsPlan = {
    regions: layout.regions,
    stripe: layout.stripe,
    source: { record: recorded ? 'recorded' : 'record', floors: taken ? 'taken' : 'to take', tags: sourceTags.length },
    targets: [],
    ok: true,
  };
  for (const [i, target] of targets.entries()) {
    const want = { ...layout, region: i + 1 };
    const step: RegionStep = { region: want.region, record: 'record', tags: [] };
    const theirs = await readRegionRecord(target);
    const counters = await tagCounters(target);
    if (theirs) {
      step.record = same(theirs, want) ? 'recorded' : 'refuse';
      if (step.record === 'refuse')
        step.reason = `it is region ${theirs.region} of ${theirs.regions} (stripe ${theirs.stripe}), not region ${want.region} of ${want.regions} (stripe ${want.stripe})`;
    } else if ([...counters.values()].some((c) => c.max > 0)) {
      step.record = 'refuse';
      step.reason = "it has handed out IDs without being a region: they may be region 0's (start the other regions on fresh databases)";
    }
    const targetTags = new Map((await new PostgresBizStore(target).listBiz()).map((t) => [t.bizTag, t]));
    for (const tag of sourceTags) {
      const floor = hasCounter(tag.mode) ? (floors.get(tag.bizTag) ?? 0) : 0;
      const mine = targetTags.get(tag.bizTag);
      const counter = counters.get(tag.bizTag);
      if (!mine) step.tags.push({ bizTag: tag.bizTag, action: 'create', floor });
      else if (mine.mode !== tag.mode || mine.format !== tag.format || mine.shards !== tag.shards) {
        step.tags.push({
          bizTag: tag.bizTag,
          action: 'refuse',
          floor,
          reason: `its definition differs from region 0's (mode ${mine.mode}/${tag.mode}, format ${mine.format}/${tag.format}, shards ${mine.shards}/${tag.shards})`,
        });
      } else if (!counter || counter.floor >= floor || floor === 0) step.tags.push({ bizTag: tag.bizTag, action: 'unchanged', floor });
      else if (counter.max > counter.floor) {
        step.tags.push({
          bizTag: tag.bizTag,
          action: 'refuse',
          floor,
          reason: `this region already handed out its IDs up to ${counter.max} without a floor at ${floor}: they may be region 0's`,
        });
      } else step.tags.push({ bizTag: tag.bizTag, action: 'raise', floor });
    }
    if (step.record === 'refuse' || step.tags.some((t) => t.action === 'refuse')) plan.ok = false;
    plan.targets.push(step);
  }
  return plan;
}

/** Applies the plan (see the header); throws, having changed nothing, when the plan has a refusal. */
export async function applyRegions(
  source: Database,
  targets: readonly Database[],
  layout: Layout,
  say: (line: string) => void = () => undefined,
  by = 'idmint regions apply',
): Promise<RegionsPlan> {
  const first = await planRegions(source, targets, layout);
  if (!first.ok) throw new IdmintError('BAD_REQUEST', 'the plan has refusals (run `idmint regions plan` to see them); nothing was changed');
  // 1 and 2 at once: with every allocation waited out and new ones held, region 0's layout goes on
  // every counter (an allocation after it takes region 0's stripes only) and each counter, final
  // now, is kept as its tag's floor.
  await source.transaction(async (tx) => {
    await lockCounters(tx);
    await recordRegion(tx, { ...layout, region: 0 }, by);
    await takeRegionFloors(tx);
  });
  say(
    `region 0: ${first.source.record === 'record' ? 'recorded' : 'already recorded'}, floors ${first.source.floors === 'to take' ? 'taken' : 'kept from the first run'}`,
  );
  // 3. The other regions, on the floors as taken.
  const plan = await planRegions(source, targets, layout);
  const defs = new Map((await new PostgresBizStore(source).listBiz()).map((t) => [t.bizTag, t]));
  for (const [i, step] of plan.targets.entries()) {
    if (step.record === 'refuse' || step.tags.some((t) => t.action === 'refuse'))
      throw new IdmintError('BAD_REQUEST', `region ${step.region}: ${step.reason ?? step.tags.find((t) => t.reason)?.reason}`);
    const target = targets[i]!;
    await target.transaction(async (tx) => {
      await lockCounters(tx);
      await recordRegion(tx, { ...layout, region: step.region }, by);
    });
    const store = new PostgresBizStore(target);
    for (const [j, tag] of step.tags.entries()) {
      const def = defs.get(tag.bizTag)!;
      const counted = hasCounter(def.mode) && tag.floor > 0 ? { startAfter: tag.floor } : {};
      if (tag.action === 'create') {
        await store.createBiz({
          bizTag: def.bizTag,
          mode: def.mode,
          step: def.step,
          maxLimit: def.maxLimit,
          shards: def.shards,
          fallback: def.fallback,
          pool: def.pool,
          format: def.format,
          description: def.description,
          ...counted,
        });
      } else if (tag.action === 'raise') await store.updateBiz(def.bizTag, counted);
      say(
        `region ${step.region} [${j + 1}/${step.tags.length}] ${tag.bizTag}: ${tag.action === 'unchanged' ? 'unchanged' : tag.action === 'create' ? 'created' : 'raised'}${tag.floor > 0 ? `, next ID above ${tag.floor}` : ''}`,
      );
    }
  }
  return plan;
}
