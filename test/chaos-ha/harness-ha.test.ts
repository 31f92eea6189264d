import { describe, it } from 'vitest';
import { expectShortChaosRun } from '../support/chaos-short-run.js';

/**
 * The short chaos run of `npm run chaos -- --topology ha`, CI's own step: the same roles on
 * replicated servers (three Kafka brokers, a ZooKeeper ensemble of three, Redis under Sentinel,
 * Postgres under Patroni), load through every path at once, every fault kind of the ha schedule
 * once (leaders killed and hung, a Patroni failover with and without its last commits): zero
 * duplicates, every fault recovered.
 */
describe('chaos, short run on replicated servers', () => {
  it('every ha fault kind once under load on every path: zero duplicates', { timeout: 900_000 }, async () => {
    await expectShortChaosRun('ha', 20261127, 'test/chaos-ha/harness-ha.test.ts');
  });
});
