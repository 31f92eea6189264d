import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { appendRange, blocksOf, blocksSize, idsOf, takeFromBlocks, type Block } from '../../../src/core/block.js';
import { SegmentBuffer } from '../../../src/core/segment-buffer.js';
import type { Segment } from '../../../src/core/ports.js';

describe('blocks', () => {
  it('appendRange merges a continuing range and keeps others apart', () => {
    const blocks: Block[] = [];
    appendRange(blocks, 1, 5);
    appendRange(blocks, 6, 9);
    appendRange(blocks, 20, 20);
    expect(blocks).toEqual([
      { start: 1, end: 9 },
      { start: 20, end: 20 },
    ]);
  });

  it('blocksOf and idsOf are inverse on any list of distinct IDs in order', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 1, max: 10_000 }), { maxLength: 200 }), (raw) => {
        const ids = raw.map(String);
        const blocks = blocksOf(ids);
        expect(idsOf(blocks)).toEqual(ids);
        expect(blocksSize(blocks)).toBe(ids.length);
      }),
    );
  });

  it('SegmentBuffer.nextBlocks: disjoint, non-empty, add up to count, never cross maxLimit, never wrap', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 1, max: 2000 }),
        fc.array(fc.integer({ min: 1, max: 300 }), { minLength: 1, maxLength: 20 }),
        async (step, maxLimit, counts) => {
          let maxId = 0;
          const buffer = new SegmentBuffer({
            bizTag: 'b',
            baseStep: step,
            maxStep: step,
            allocate: async (bizTag, n): Promise<Segment> => {
              if (maxId >= maxLimit) {
                const { SegmentExhaustedError } = await import('../../../src/core/errors.js');
                throw new SegmentExhaustedError(bizTag, maxLimit);
              }
              const start = maxId + 1;
              maxId = Math.min(maxId + n, maxLimit);
              return { bizTag, shard: 0, start, end: maxId };
            },
          });
          const seen: Block[] = [];
          let served = 0;
          for (const count of counts) {
            try {
              const blocks = await buffer.nextBlocks(count);
              expect(blocksSize(blocks)).toBe(count);
              for (const b of blocks) {
                expect(b.start).toBeGreaterThanOrEqual(1);
                expect(b.end).toBeGreaterThanOrEqual(b.start);
                expect(b.end).toBeLessThanOrEqual(maxLimit);
              }
              seen.push(...blocks);
              served += count;
            } catch (err) {
              expect((err as { code?: string }).code).toBe('SEGMENT_EXHAUSTED');
              expect(served + count).toBeGreaterThan(maxLimit);
            }
          }
          const sorted = [...seen].sort((a, b) => a.start - b.start);
          for (let i = 1; i < sorted.length; i++) expect(sorted[i]!.start).toBeGreaterThan(sorted[i - 1]!.end);
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('blocksOf refuses IDs a number cannot hold', () => {
  it('throws for an ID above 2^53 - 1 instead of rounding it (two IDs would become one)', () => {
    expect(blocksOf(['9007199254740991'])).toEqual([{ start: 9007199254740991, end: 9007199254740991 }]);
    expect(() => blocksOf(['2124792667136082001', '2124792667136082002'])).toThrow(/above 2\^53 - 1/);
  });
});

describe('takeFromBlocks', () => {
  it('moves exactly the first n IDs in order, splitting a block, and the queue keeps the rest (fast-check)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 50 }), fc.integer({ min: 1, max: 40 })), { maxLength: 8 }),
        fc.array(fc.integer({ min: 0, max: 120 }), { minLength: 1, maxLength: 6 }),
        (shape, asks) => {
          let next = 1;
          const queue: Block[] = shape.map(([gap, size]) => {
            const start = next + gap;
            next = start + size;
            return { start, end: start + size - 1 };
          });
          const all = idsOf(queue);
          const handed: string[] = [];
          for (const n of asks) {
            const into: Block[] = [];
            const before = blocksSize(queue);
            const moved = takeFromBlocks(queue, n, into);
            expect(moved).toBe(Math.min(n, before));
            expect(blocksSize(into)).toBe(moved);
            for (const b of into) expect(b.start <= b.end).toBe(true);
            handed.push(...idsOf(into));
          }
          expect([...handed, ...idsOf(queue)]).toEqual(all);
        },
      ),
    );
  });
});
