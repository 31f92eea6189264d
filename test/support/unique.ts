import { expect } from 'vitest';

/**
 * The checks of the invariant that matters most: no ID handed out twice. Sorting a copy keeps
 * them lean for millions of IDs; ranges are checked by a sweep, never expanded into IDs.
 */

type Ids = readonly string[] | readonly bigint[] | readonly number[] | BigInt64Array | Float64Array;

const DECIMAL = /^-?[0-9]{1,19}$/;

/** The values seen more than once (each listed once), in ascending order. Formatted IDs (base62, sqids) compare as strings. */
export function duplicatesOf(ids: Ids): Array<bigint | string> {
  const values = Array.from(ids as ArrayLike<string | number | bigint>);
  if (values.some((v) => typeof v === 'string' && !DECIMAL.test(v))) {
    const sorted = (values as string[]).slice().sort();
    const out: string[] = [];
    for (let i = 1; i < sorted.length; i++) if (sorted[i] === sorted[i - 1] && out[out.length - 1] !== sorted[i]) out.push(sorted[i]!);
    return out;
  }
  // 63-bit IDs do not fit a Float64Array: sort them as 64-bit integers.
  const sorted = BigInt64Array.from(values, (v) => BigInt(v)).sort();
  const out: bigint[] = [];
  for (let i = 1; i < sorted.length; i++) if (sorted[i] === sorted[i - 1] && out[out.length - 1] !== sorted[i]) out.push(sorted[i]!);
  return out;
}

/** Fails naming the first duplicates and how many there are. */
export function expectNoDuplicates(ids: Ids, what = 'IDs'): void {
  const dups = duplicatesOf(ids);
  expect(dups.length, `${dups.length} duplicate ${what} among ${ids.length}, first: ${dups.slice(0, 10).join(', ')}`).toBe(0);
}

export interface Range {
  readonly start: number | bigint;
  readonly end: number | bigint;
}

/** Pairs of ranges that share an ID (inclusive ends), found by a sweep over the sorted starts. */
export function overlapsOf(ranges: readonly Range[]): Array<[Range, Range]> {
  const sorted = [...ranges].sort((a, b) => (BigInt(a.start) < BigInt(b.start) ? -1 : BigInt(a.start) > BigInt(b.start) ? 1 : 0));
  const out: Array<[Range, Range]> = [];
  let reach: Range | undefined;
  for (const r of sorted) {
    if (reach && BigInt(r.start) <= BigInt(reach.end)) out.push([reach, r]);
    if (!reach || BigInt(r.end) > BigInt(reach.end)) reach = r;
  }
  return out;
}

/** Fails naming the first overlapping ranges. */
export function expectDisjoint(ranges: readonly Range[], what = 'ranges'): void {
  const overlaps = overlapsOf(ranges);
  const first = overlaps.slice(0, 5).map(([a, b]) => `[${a.start}, ${a.end}] and [${b.start}, ${b.end}]`);
  expect(overlaps.length, `${overlaps.length} overlapping ${what}, first: ${first.join('; ')}`).toBe(0);
}

/** IDs that lie in no ledger segment (should be none); stops after the first 11. */
export function outsideLedger(ids: Iterable<number>, ledger: Array<{ start: number; end: number }>): number[] {
  const segs = [...ledger].sort((a, b) => a.start - b.start);
  const bad: number[] = [];
  for (const id of ids) {
    let lo = 0;
    let hi = segs.length - 1;
    let found = false;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const s = segs[mid]!;
      if (id < s.start) hi = mid - 1;
      else if (id > s.end) lo = mid + 1;
      else {
        found = true;
        break;
      }
    }
    if (!found) bad.push(id);
    if (bad.length > 10) break;
  }
  return bad;
}
