import { setImmediate as tick } from 'node:timers/promises';
import { expect } from 'vitest';
import { CachedUidGenerator } from '../../src/core/cached-uid.js';
import { LEAF_LAYOUT, MIN_TIME_BASED_ID } from '../../src/core/layout.js';
import { SnowflakeGenerator } from '../../src/core/snowflake.js';
import { expectNoDuplicates } from './unique.js';

/**
 * The generators' scale proofs, shared by the unit tier (a million IDs) and the chaos project
 * (ten million, test/chaos/generators-scale.test.ts): the same check at two sizes.
 */

/** `n` Snowflake IDs from a tight loop: strictly increasing (which proves all unique), the first `sampled` re-proved by sorting. */
export function issueInTightLoop(n: number, sampled: number): void {
  const gen = new SnowflakeGenerator({ workerId: 513 });
  const sample = new BigInt64Array(sampled);
  let prev = gen.nextId();
  let notIncreasing = 0;
  for (let i = 1; i < n; i++) {
    const id = gen.nextId();
    if (id <= prev) notIncreasing++;
    if (i <= sample.length) sample[i - 1] = id;
    prev = id;
  }
  expect(notIncreasing).toBe(0);
  expectNoDuplicates(sample);
  expect(sample[0]! >= MIN_TIME_BASED_ID).toBe(true);
  expect(LEAF_LAYOUT.decode(prev).worker).toBe(513);
}

/** `total` cached-uid IDs to eight async takers while padding runs: the global take order strictly increasing, the first `sampled` re-proved by sorting. */
export async function serveWhilePadding(total: number, sampled: number): Promise<void> {
  const gen = new CachedUidGenerator({ workerId: 12, boostPower: 1, paddingFactor: 50 });
  gen.start();
  const sample = new BigInt64Array(sampled);
  let taken = 0;
  let last = -1n;
  let outOfOrder = 0;
  let paddedBetweenTakes = 0;
  // Takes are serialised by the event loop, so global take order must be strictly increasing.
  const taker = async (seed: number): Promise<void> => {
    let burst = 1 + (seed % 7) * 1000;
    while (taken < total) {
      const before = gen.depth();
      for (let i = 0; i < burst && taken < total; i++) {
        const id = gen.getUid();
        if (id <= last) outOfOrder++;
        last = id;
        if (taken < sample.length) sample[taken] = id;
        taken++;
      }
      burst = 1 + ((burst * 31 + seed) % 9000);
      const depthAfterBurst = gen.depth();
      await tick();
      if (gen.depth() > depthAfterBurst) paddedBetweenTakes++;
      if (before < 0) expect.fail('depth is never negative');
    }
  };
  await Promise.all([1, 2, 3, 4, 5, 6, 7, 8].map((s) => taker(s)));
  expect(taken).toBe(total);
  expect(outOfOrder).toBe(0);
  expectNoDuplicates(sample);
  expect(paddedBetweenTakes).toBeGreaterThan(0);
  gen.close();
}
