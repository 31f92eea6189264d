import { afterEach, describe, expect, it } from 'vitest';
import type { Segment } from '../../../src/core/ports.js';
import { fenceStore } from '../../../src/fence/fence.js';
import { ZookeeperFence } from '../../../src/fence/zookeeper-fence.js';
import { PostgresBizStore } from '../../../src/store/biz-store.js';
import { migrate } from '../../../src/store/migrations.js';
import { createPgDatabase, type PgDatabase, type PgIdentity } from '../../../src/store/pg.js';
import { env } from '../../support/env.js';
import { uniqueName } from '../../support/names.js';
import { PgPair } from '../../support/pg-pair.js';
import { sleep, untilValue } from '../../support/poll.js';
import { overlapsOf } from '../../support/unique.js';

const STEP = 1000;

/**
 * A real asynchronous failover on a primary and a streaming standby: the multi-host URL follows the
 * primary, and a promotion that lost the last commits repeats segments unless the fence stops it.
 */
describe('Postgres failover', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    // A failing cleanup is reported, not taken as the test's failure.
    for (const c of cleanups.splice(0).reverse()) await c().catch((err: unknown) => console.warn('cleanup failed:', err));
  });

  async function setUp(
    options: { synchronous?: boolean } = {},
  ): Promise<{ pair: PgPair; db: PgDatabase; store: PostgresBizStore; failovers: Array<[PgIdentity, PgIdentity]> }> {
    const pair = await PgPair.start(options);
    cleanups.push(() => pair.stop());
    const failovers: Array<[PgIdentity, PgIdentity]> = [];
    const db = createPgDatabase({ connectionString: pair.url, connectionTimeoutMillis: 2000, onFailover: (from, to) => failovers.push([from, to]) });
    cleanups.push(() => db.close());
    await migrate(db);
    return { pair, db, store: new PostgresBizStore(db, { owner: 'test' }), failovers };
  }

  /** Allocates until the new primary answers (the first tries fail NOT_READY while the pool re-picks). */
  async function allocateAfterFailover(allocate: () => Promise<Segment>): Promise<Segment> {
    return untilValue(
      'a segment from the promoted primary',
      () => allocate().catch(() => undefined),
      (s) => s !== undefined,
      { timeoutMs: 30_000, intervalMs: 100 },
    ) as Promise<Segment>;
  }

  it('a multi-host URL finds the primary, follows the promotion, and sees the new timeline', async () => {
    const { pair, db, store, failovers } = await setUp();
    const bizTag = uniqueName('follow');
    await store.createBiz({ bizTag, step: STEP });
    const before = await store.allocate(bizTag, STEP);
    expect(db.server()).toMatchObject({ host: `127.0.0.1:${pair.primaryPort}`, timeline: 1, failovers: 0 });
    await pair.caughtUp();
    await pair.crashPrimary();
    await pair.promote();
    const after = await allocateAfterFailover(() => store.allocate(bizTag, STEP));
    expect(after.start).toBe(before.end + 1); // nothing was lost: the standby had replayed it all
    await untilValue(
      'the failover noted',
      () => failovers.length,
      (n) => n === 1,
    );
    expect(failovers[0]![0].timeline).toBe(1);
    expect(failovers[0]![1].timeline).toBe(2);
    expect(db.server()).toMatchObject({ host: `127.0.0.1:${pair.standbyPort}`, timeline: 2, failovers: 1 });
  });

  /** Segments handed out before the failover (some of them never replicated) and after it. */
  async function lostTail(fenced: boolean): Promise<{ overlaps: number; rewinds: number; handedOut: number }> {
    const { pair, store } = await setUp();
    const bizTag = uniqueName(fenced ? 'fenced' : 'bare');
    await store.createBiz({ bizTag, step: STEP });
    let rewinds = 0;
    let allocator: Pick<PostgresBizStore, 'allocate'> = store;
    if (fenced) {
      const fence = await ZookeeperFence.open({ connect: env('ZK_CONNECT'), root: `/idmint-test/${uniqueName('failover')}` });
      cleanups.push(() => fence.close());
      allocator = fenceStore(store, fence, { onRewind: () => void rewinds++ });
    }
    const segments: Segment[] = [];
    for (let i = 0; i < 5; i++) segments.push(await allocator.allocate(bizTag, STEP));
    await pair.caughtUp();
    // The tail: committed on the primary, handed out, never delivered to the standby.
    await pair.stopWalDelivery();
    for (let i = 0; i < 5; i++) segments.push(await allocator.allocate(bizTag, STEP));
    await pair.crashPrimary();
    await pair.promote();
    segments.push(await allocateAfterFailover(() => allocator.allocate(bizTag, STEP)));
    for (let i = 0; i < 9; i++) segments.push(await allocator.allocate(bizTag, STEP));
    return { overlaps: overlapsOf(segments).length, rewinds, handedOut: segments.length };
  }

  it('a promotion that lost the last commits repeats segments without the fence', async () => {
    const { overlaps, handedOut } = await lostTail(false);
    // The five lost segments come back: the test can fail, and does without the fence.
    expect(overlaps, `${overlaps} overlapping segments among ${handedOut}`).toBe(5);
  });

  it('with the ZooKeeper fence the same failover repeats nothing: the rewind is found and repaired', async () => {
    const { overlaps, rewinds } = await lostTail(true);
    expect(overlaps).toBe(0);
    expect(rewinds).toBe(1);
  });

  async function fenced(store: PostgresBizStore): Promise<{ allocator: Pick<PostgresBizStore, 'allocate'>; rewinds: () => number }> {
    const fence = await ZookeeperFence.open({ connect: env('ZK_CONNECT'), root: `/idmint-test/${uniqueName('failover')}` });
    cleanups.push(() => fence.close());
    let rewinds = 0;
    return { allocator: fenceStore(store, fence, { onRewind: () => void rewinds++ }), rewinds: () => rewinds };
  }

  it('a planned switchover loses nothing: allocation goes on where it stopped, and the fence sees no rewind', async () => {
    const { pair, store, failovers } = await setUp();
    const bizTag = uniqueName('switch');
    await store.createBiz({ bizTag, step: STEP });
    const { allocator, rewinds } = await fenced(store);
    const before: Segment[] = [];
    for (let i = 0; i < 5; i++) before.push(await allocator.allocate(bizTag, STEP));
    await pair.switchover();
    const after = await allocateAfterFailover(() => allocator.allocate(bizTag, STEP));
    expect(after.start).toBe(before[4]!.end + 1);
    expect(rewinds()).toBe(0);
    await untilValue(
      'the failover noted',
      () => failovers.length,
      (n) => n === 1,
    );
  });

  it('with synchronous replication the lost-tail failover loses no handed-out segment: no rewind, no repeat', async () => {
    const { pair, store } = await setUp({ synchronous: true });
    const bizTag = uniqueName('sync');
    await store.createBiz({ bizTag, step: STEP });
    const { allocator, rewinds } = await fenced(store);
    const handedOut: Segment[] = [];
    for (let i = 0; i < 5; i++) handedOut.push(await allocator.allocate(bizTag, STEP));
    await pair.caughtUp();
    await pair.stopWalDelivery();
    // Their commits wait for the standby, which never confirms: never handed out.
    let returned = 0;
    const waiting = Array.from({ length: 3 }, () =>
      allocator.allocate(bizTag, STEP).then(
        (s) => void (returned++, handedOut.push(s)),
        () => undefined,
      ),
    );
    await sleep(500);
    expect(returned).toBe(0);
    await pair.crashPrimary();
    await Promise.all(waiting);
    await pair.promote();
    handedOut.push(await allocateAfterFailover(() => allocator.allocate(bizTag, STEP)));
    for (let i = 0; i < 5; i++) handedOut.push(await allocator.allocate(bizTag, STEP));
    expect(returned).toBe(0);
    expect(overlapsOf(handedOut)).toEqual([]);
    expect(rewinds()).toBe(0);
  });
});
