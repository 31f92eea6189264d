import { afterEach, describe, expect, it } from 'vitest';
import { outsideLedger, runTakers, startHarness, type Harness } from './helpers.js';
import { freshStore, type TestStore } from '../../support/store.js';
import { uid } from '../../support/names.js';
import { expectNoDuplicates } from '../../support/unique.js';
import { env } from '../../support/env.js';

const REDIS_URL = env('REDIS_URL');

describe('Redis pools under 16 concurrent takers while refills run (real Redis, Postgres, BullMQ)', () => {
  let store: TestStore | undefined;
  let harness: Harness | undefined;
  afterEach(async () => {
    await harness?.close();
    await store?.close();
    harness = undefined;
    store = undefined;
  });

  it.each([
    ['redis-list', 1_000_000],
    ['redis-counter', 300_000],
  ] as const)('%s: %i IDs, zero duplicates, every ID inside a ledger segment', async (kind, total) => {
    store = await freshStore();
    const bizTag = `conc-${uid()}`;
    const tag = await store.store.createBiz({ bizTag, step: 1000, pool: kind });
    harness = await startHarness({
      redisUrl: REDIS_URL,
      store: store.store,
      kind,
      // Small bounds so the run needs dozens of refills rather than one big one.
      processor: { minDepth: 20_000, maxDepth: 150_000, poolSeconds: 1, maxSegment: 50_000 },
    });
    const started = Date.now();
    const { ids, short, maxInFlight } = await runTakers({ source: harness.pool, tag, total, takers: 16, batch: 250 });
    const ended = Date.now();

    expect(ids.length).toBe(total);
    expectNoDuplicates(ids);
    const ledger = await store.ledger(bizTag);
    expect(ledger.length).toBeGreaterThan(5);
    expect(outsideLedger(ids, ledger)).toEqual([]);
    // What the test is named for: 16 takes at once, while refills ran — the pool ran dry under the
    // takers (it starts empty and holds a fraction of the run), and refills finished between their
    // first and last take, several in each half of the run.
    expect(maxInFlight).toBe(16);
    expect(short).toBeGreaterThan(0);
    const completed = await harness.queue.queue.getJobs(['completed'], 0, 1000);
    const finished = completed.filter((j) => j.name === 'refill').map((j) => j.finishedOn ?? 0);
    const middle = (started + ended) / 2;
    expect(finished.filter((at) => at >= started && at < middle).length, 'refills in the first half').toBeGreaterThan(1);
    expect(finished.filter((at) => at >= middle && at <= ended).length, 'refills in the second half').toBeGreaterThan(1);
  });
});
