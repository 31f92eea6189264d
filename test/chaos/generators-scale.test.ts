import { describe, it } from 'vitest';
import { issueInTightLoop, serveWhilePadding } from '../support/generator-scale.js';

// The generators at ten million IDs each: long proofs (15 s and 6 s of CPU), so they run in the
// chaos project; the unit tier runs the same checks at a million (test/unit/core/{snowflake,uid}.test.ts).
describe('the generators at ten million IDs', () => {
  it('Snowflake: 10 million IDs from a tight loop, strictly increasing, all ≥ 2^53, none repeated', () => {
    issueInTightLoop(10_000_000, 3_000_000);
  }, 120_000);

  it('cached uid: 10 million IDs to several concurrent async takers while padding runs, strictly increasing, none repeated', async () => {
    await serveWhilePadding(10_000_000, 2_000_000);
  }, 120_000);
});
