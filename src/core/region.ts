/**
 * Several regions, one number line per tag, no coordination: the line is cut into stripes of
 * `stripe` IDs (stripe k holds k·stripe+1 … (k+1)·stripe), and region r of N takes the stripes
 * with k mod N = r. Each region's Postgres keeps its own counters; a region's next segment starts
 * after its counter, in the first stripe of its own at or after that point, and ends at the
 * stripe's end at the latest. So two regions' segments never meet whatever their counters say,
 * a segment is one contiguous range (blocks stay ranges), IDs of the regions stay of similar size,
 * and the tag's limit cuts a segment short rather than wrap.
 *
 * One region (no layout) is the plain counter: the next segment is (max, max + step], cut at the
 * limit — today's segments exactly.
 *
 * This is the model the allocation SQL (store/biz-store.ts) follows, tested against it.
 */
import { ConfigError } from './errors.js';
import { MAX_SEGMENT_ID } from './ports.js';

export interface RegionLayout {
  /** How many regions the ID space is split for (2…64), fixed for the life of the data. */
  readonly regions: number;
  /** This region's number, 0 … regions − 1. */
  readonly region: number;
  /** IDs per stripe (default 1,000,000): a segment never crosses a stripe's end. */
  readonly stripe: number;
}

export const MAX_REGIONS = 64;
export const DEFAULT_STRIPE = 1_000_000;

/** Checks a layout's numbers; throws ConfigError (CONFIG_INVALID) naming the one at fault. */
export function regionLayout(regions: number, region: number, stripe: number = DEFAULT_STRIPE): RegionLayout {
  if (!Number.isSafeInteger(regions) || regions < 2 || regions > MAX_REGIONS)
    throw new ConfigError(`regions must be an integer from 2 to ${MAX_REGIONS}, got ${regions}`, 'regions');
  if (!Number.isSafeInteger(region) || region < 0 || region >= regions)
    throw new ConfigError(`region must be an integer from 0 to ${regions - 1}, got ${region}`, 'region');
  if (!Number.isSafeInteger(stripe) || stripe < 1 || stripe > Math.floor(MAX_SEGMENT_ID / regions)) {
    throw new ConfigError(`stripe must be an integer from 1 to ${Math.floor(MAX_SEGMENT_ID / regions)}, got ${stripe}`, 'stripe');
  }
  return Object.freeze({ regions, region, stripe });
}

/** The region whose stripes hold `id` (≥ 1). */
export function regionOf(id: number, layout: Pick<RegionLayout, 'regions' | 'stripe'>): number {
  return Math.floor((id - 1) / layout.stripe) % layout.regions;
}

/**
 * The next segment after counter `max` for up to `step` IDs, or undefined when none fits at or
 * below `limit` (the tag is exhausted in this region). Without a layout: (max, min(max + step, limit)].
 */
export function nextSegment(max: number, step: number, limit: number, layout?: RegionLayout): { start: number; end: number } | undefined {
  if (!layout) return max < limit ? { start: max + 1, end: Math.min(max + step, limit) } : undefined;
  const { regions, region, stripe } = layout;
  const at = Math.floor(max / stripe); // the stripe holding max + 1
  const k = at + ((((region - (at % regions)) % regions) + regions) % regions);
  const start = k === at ? max + 1 : k * stripe + 1;
  if (start > limit) return undefined;
  return { start, end: Math.min(start + step - 1, (k + 1) * stripe, limit) };
}

/** The high bits of a worker id that name the region: ⌈log2 regions⌉ (1 for 2 regions, 3 for 5 to 8). */
export function regionBits(regions: number): number {
  return Math.ceil(Math.log2(regions));
}

/**
 * Snowflake and uid tags: the region sits in the high bits of the worker id, so a layout of
 * `workerBits` leaves `workerBits − regionBits` for the workers of each region (Leaf's 10 with
 * 2 regions: 512 workers per region; with 8: 128). Returns the local range and how to place a
 * local id in it, or throws when the layout's worker field cannot hold the regions.
 */
export function regionalWorkerIds(
  layout: Pick<RegionLayout, 'regions' | 'region'>,
  maxWorkerId: number,
): { maxLocal: number; workerId(local: number): number; regionOf(workerId: number): number } {
  const workerBits = Math.round(Math.log2(maxWorkerId + 1));
  const bits = regionBits(layout.regions);
  if (2 ** workerBits !== maxWorkerId + 1 || workerBits <= bits) {
    throw new ConfigError(`a worker field of ${workerBits} bits cannot hold ${layout.regions} regions (${bits} bits) and workers beside them`, 'regions');
  }
  const localBits = workerBits - bits;
  return {
    maxLocal: 2 ** localBits - 1,
    workerId: (local) => layout.region * 2 ** localBits + local,
    regionOf: (workerId) => Math.floor(workerId / 2 ** localBits),
  };
}
