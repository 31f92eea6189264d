import { describe, it } from 'vitest';
import { expectShortChaosRun } from '../support/chaos-short-run.js';

/**
 * The short chaos run of `npm run chaos`: the topology (2 api, 2 responders, 2 refill workers)
 * on private Kafka, ZooKeeper, Redis and Postgres, load through every path at once, every fault
 * kind once: zero duplicates, every fault recovered (test/support/chaos-short-run.ts).
 */
describe('chaos, short run', () => {
  it('every fault kind once under load on every path: zero duplicates', { timeout: 600_000 }, async () => {
    await expectShortChaosRun('single', 20261123, 'test/chaos/harness.test.ts');
  });
});
