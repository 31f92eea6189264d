import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { minInsyncFor, replicationFor } from '../../../src/kafka/topics.js';

describe('the replication idmint gives its topics', () => {
  it('is min(3, brokers) unless configured, and min.insync.replicas one fewer, at least 1', () => {
    expect([1, 2, 3, 5].map((brokers) => replicationFor(brokers))).toEqual([1, 2, 3, 3]);
    expect(replicationFor(5, 5)).toBe(5);
    expect([1, 2, 3, 5].map(minInsyncFor)).toEqual([1, 1, 2, 4]);
  });

  it('always leaves a write acknowledged by min.insync.replicas on a broker beyond any one lost (factor ≥ 2)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 50 }), fc.option(fc.integer({ min: 1, max: 32 }), { nil: undefined }), (brokers, configured) => {
        const factor = replicationFor(brokers, configured);
        const insync = minInsyncFor(factor);
        expect(insync).toBeGreaterThanOrEqual(1);
        expect(insync).toBeLessThanOrEqual(factor);
        // A factor of two or more can lose one broker and still accept writes.
        if (factor >= 2) expect(factor - 1).toBeGreaterThanOrEqual(insync);
      }),
    );
  });
});
