import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nextSegment, regionLayout, regionOf, type RegionLayout } from '../../../src/core/region.js';
import { ConfigError } from '../../../src/core/errors.js';

/** Allocates one region's segments until `steps` runs out or the region is exhausted. */
function allocateAll(layout: RegionLayout | undefined, steps: number[], limit: number, from = 0): Array<{ start: number; end: number }> {
  let max = from;
  const out: Array<{ start: number; end: number }> = [];
  for (const step of steps) {
    const seg = nextSegment(max, step, limit, layout);
    if (!seg) break;
    out.push(seg);
    max = seg.end;
  }
  return out;
}

describe('region layout', () => {
  it('without a layout is the plain counter: (max, max + step], cut at the limit', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000 }), fc.integer({ min: 1, max: 5000 }), fc.integer({ min: 1, max: 20_000 }), (max, step, limit) => {
        const seg = nextSegment(max, step, limit);
        if (max >= limit) expect(seg).toBeUndefined();
        else expect(seg).toEqual({ start: max + 1, end: Math.min(max + step, limit) });
      }),
    );
  });

  it('regions never share an ID: every segment is contiguous, inside its own stripes, under the limit, each region ahead of its counter', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 8 }),
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 1, max: 5000 }),
        fc.array(fc.array(fc.integer({ min: 1, max: 120 }), { minLength: 1, maxLength: 40 }), { minLength: 2, maxLength: 8 }),
        fc.array(fc.integer({ min: 0, max: 300 }), { minLength: 8, maxLength: 8 }),
        (regions, stripe, limit, stepsPerRegion, starts) => {
          const seen = new Map<number, number>();
          for (let region = 0; region < Math.min(regions, stepsPerRegion.length); region++) {
            const layout = regionLayout(regions, region, stripe);
            let last = starts[region]!;
            for (const seg of allocateAll(layout, stepsPerRegion[region]!, limit, starts[region])) {
              expect(seg.start).toBeGreaterThan(last);
              expect(seg.end).toBeGreaterThanOrEqual(seg.start);
              expect(seg.end).toBeLessThanOrEqual(limit);
              // One stripe: contiguous, and all of it this region's.
              expect(Math.floor((seg.start - 1) / stripe)).toBe(Math.floor((seg.end - 1) / stripe));
              expect(regionOf(seg.start, layout)).toBe(region);
              for (let id = seg.start; id <= seg.end; id++) {
                expect(seen.get(id), `ID ${id} of region ${region}`).toBeUndefined();
                seen.set(id, region);
              }
              last = seg.end;
            }
          }
        },
      ),
    );
  });

  it('a region wastes no ID of its own stripes: its segments cover them in order, each as large as step allows', () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 6 }), fc.integer({ min: 1, max: 40 }), fc.integer({ min: 1, max: 60 }), (regions, stripe, step) => {
        const limit = regions * stripe * 5;
        for (let region = 0; region < regions; region++) {
          const layout = regionLayout(regions, region, stripe);
          const segs = allocateAll(
            layout,
            Array.from({ length: 10_000 }, () => step),
            limit,
          );
          const ids = segs.flatMap((s) => Array.from({ length: s.end - s.start + 1 }, (_, i) => s.start + i));
          const own = Array.from({ length: limit }, (_, i) => i + 1).filter((id) => regionOf(id, layout) === region);
          expect(ids).toEqual(own);
          for (const s of segs) expect(s.end - s.start + 1 === step || s.end % stripe === 0 || s.end === limit).toBe(true);
        }
      }),
    );
  });

  it("a counter past the limit, or a limit inside another region's stripe, gives no segment (exhausted, never wrapped)", () => {
    const layout = regionLayout(2, 1, 10);
    expect(nextSegment(5, 3, 10, layout)).toBeUndefined(); // region 1 starts at 11
    expect(nextSegment(5, 3, 12, layout)).toEqual({ start: 11, end: 12 });
    expect(nextSegment(12, 3, 12, layout)).toBeUndefined();
    expect(nextSegment(10, 100, 2 ** 53 - 1, regionLayout(2, 0, 10))).toEqual({ start: 21, end: 30 });
  });

  it('refuses layouts it cannot keep', () => {
    expect(() => regionLayout(1, 0)).toThrow(ConfigError);
    expect(() => regionLayout(65, 0)).toThrow(/regions must be an integer from 2 to 64/);
    expect(() => regionLayout(3, 3)).toThrow(/region must be an integer from 0 to 2, got 3/);
    expect(() => regionLayout(2, 0, 0)).toThrow(/stripe/);
    expect(() => regionLayout(2, 0, 2 ** 53)).toThrow(/stripe/);
  });
});
