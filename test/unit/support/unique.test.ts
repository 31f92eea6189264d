import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { duplicatesOf, overlapsOf } from '../../support/unique.js';

// The duplicate checks every ID test ends with are themselves checked against the obvious
// definitions: a value seen twice; two inclusive ranges sharing an ID.
describe('test/support duplicate checks', () => {
  it('duplicatesOf finds exactly the values seen more than once, decimal or formatted', () => {
    fc.assert(
      fc.property(fc.array(fc.bigInt({ min: 0n, max: (1n << 63n) - 1n }), { maxLength: 200 }), fc.array(fc.nat(20), { maxLength: 20 }), (values, picks) => {
        const ids = [...values, ...picks.filter((i) => i < values.length).map((i) => values[i]!)].map(String);
        const counts = new Map<string, number>();
        for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
        const expected = [...counts]
          .filter(([, n]) => n > 1)
          .map(([id]) => BigInt(id))
          .sort((a, b) => (a < b ? -1 : 1));
        expect(duplicatesOf(ids)).toEqual(expected);
      }),
    );
    expect(duplicatesOf(['aZ', 'b9', 'aZ'])).toEqual(['aZ']);
  });

  it('overlapsOf finds a pair exactly when two ranges share an ID', () => {
    const range = fc.tuple(fc.integer({ min: 1, max: 500 }), fc.integer({ min: 0, max: 20 })).map(([start, len]) => ({ start, end: start + len }));
    fc.assert(
      fc.property(fc.array(range, { maxLength: 40 }), (ranges) => {
        const shared = ranges.some((a, i) => ranges.some((b, j) => i < j && a.start <= b.end && b.start <= a.end));
        expect(overlapsOf(ranges).length > 0).toBe(shared);
      }),
    );
  });
});
