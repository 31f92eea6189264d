import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Segment } from '../../../src/core/ports.js';
import { fenceStore, raiseCountersToFences } from '../../../src/fence/fence.js';
import { ZookeeperFence } from '../../../src/fence/zookeeper-fence.js';
import { env } from '../../support/env.js';
import { uniqueName } from '../../support/names.js';
import { freshStore, type TestStore } from '../../support/store.js';
import { expectDisjoint, overlapsOf } from '../../support/unique.js';

const STEP = 1000;

/** What a promoted replica that missed the last commits looks like to idmint: the tag's counter moved back, its ledger rows gone. */
async function rewind(st: TestStore, bizTag: string, by: number): Promise<void> {
  const { rows } = await st.db.query<{ max_id: bigint }>('UPDATE idmint_segment SET max_id = max_id - $2 WHERE biz_tag = $1 RETURNING max_id', [bizTag, by]);
  await st.db.query('DELETE FROM idmint_ledger WHERE biz_tag = $1 AND end_id > $2', [bizTag, rows[0]!.max_id]);
}

describe('segment fence in ZooKeeper', () => {
  let st: TestStore;
  let fence: ZookeeperFence;
  let root: string;

  beforeAll(async () => {
    st = await freshStore('fence');
    root = `/idmint-test/${uniqueName('fence')}`;
    fence = await ZookeeperFence.open({ connect: env('ZK_CONNECT'), root });
  });
  afterAll(async () => {
    await fence?.close();
    await st?.close();
  });

  it('refuses a root that is no absolute path as a misconfiguration naming it; a trailing / is the same root', async () => {
    expect(() => new ZookeeperFence({ connect: env('ZK_CONNECT'), root: 'idmint/fence' })).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID', field: 'root' }),
    );
    expect(() => new ZookeeperFence({ connect: env('ZK_CONNECT'), root: '/' })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID', field: 'root' }));
    const slashed = await ZookeeperFence.open({ connect: env('ZK_CONNECT'), root: `${root}/`, probeEveryMs: undefined });
    try {
      await fence.raise('slashed', 0, 77);
      expect(await slashed.current('slashed', 0)).toBe(77);
    } finally {
      await slashed.close();
    }
  });

  it('a mark starts at 0, is raised and never lowered, and concurrent raises keep the highest', async () => {
    expect(await fence.current('marks', 0)).toBe(0);
    await fence.raise('marks', 0, 5000);
    await fence.raise('marks', 0, 3000);
    expect(await fence.current('marks', 0)).toBe(5000);
    const ends = Array.from({ length: 40 }, (_, i) => 6000 + ((i * 7919) % 40) * 100);
    await Promise.all(ends.map((e) => fence.raise('marks', 1, e)));
    expect(await fence.current('marks', 1)).toBe(Math.max(...ends));
    expect(await fence.all()).toEqual(
      expect.arrayContaining([
        { bizTag: 'marks', shard: 0, end: 5000 },
        { bizTag: 'marks', shard: 1, end: Math.max(...ends) },
      ]),
    );
  });

  it('a rewound counter repeats segments without the fence, and never with it', async () => {
    // Without: the lost commits' ranges come back.
    const plain = uniqueName('plain');
    await st.store.createBiz({ bizTag: plain, step: STEP });
    const before = await Promise.all(Array.from({ length: 5 }, () => st.store.allocate(plain, STEP)));
    await rewind(st, plain, 3 * STEP);
    const after = await Promise.all(Array.from({ length: 5 }, () => st.store.allocate(plain, STEP)));
    expect(overlapsOf([...before, ...after]).length).toBe(3);

    // With: the rewind is found, counted, the counter raised past the mark, and nothing repeats.
    const bizTag = uniqueName('fenced');
    await st.store.createBiz({ bizTag, step: STEP });
    const rewinds: Array<{ segment: Segment; mark: number }> = [];
    const fenced = fenceStore(st.store, fence, { onRewind: (_tag, _shard, segment, mark) => rewinds.push({ segment, mark }) });
    const first = await Promise.all(Array.from({ length: 5 }, () => fenced.allocate(bizTag, STEP)));
    await rewind(st, bizTag, 3 * STEP);
    const second = await Promise.all(Array.from({ length: 5 }, () => fenced.allocate(bizTag, STEP)));
    expectDisjoint([...first, ...second]);
    expect(rewinds.length).toBeGreaterThan(0);
    expect(rewinds.every((r) => r.segment.start <= r.mark)).toBe(true);
    expect(Math.min(...second.map((s) => s.start))).toBeGreaterThan(Math.max(...first.map((s) => s.end)));
  });

  it('a claim is refused at or below the mark, so two overlapping segments never both leave', async () => {
    expect(await fence.claim('claims', 0, 1, 1000)).toBe(true);
    expect(await fence.claim('claims', 0, 1, 1000)).toBe(false);
    expect(await fence.claim('claims', 0, 500, 900)).toBe(false);
    expect(await fence.claim('claims', 0, 1001, 2000)).toBe(true);
    expect(await fence.current('claims', 0)).toBe(2000);
    // Concurrent claims of one range: exactly one wins.
    const wins = await Promise.all(Array.from({ length: 10 }, () => fence.claim('claims', 1, 1, 500)));
    expect(wins.filter(Boolean)).toHaveLength(1);
  });

  it('a mark read before a failover and an allocation after it: the rewound segment another process handed out is refused', async () => {
    // Process A allocates [1, 1000] and hands it out (claimed). Process B read the mark before
    // that claim (0), then its allocation waits out a failover that lost A's commit and returns
    // [1, 1000] again: above B's stale mark. The chaos run on replicated servers found this (two
    // Kafka pool blocks handed out twice); a plain raise let both segments leave.
    const bizTag = uniqueName('stale');
    await st.store.createBiz({ bizTag, step: STEP });
    const a = fenceStore(st.store, fence);
    const staleOnce = {
      ...fence,
      current: async () => 0,
      claim: fence.claim.bind(fence),
      raise: fence.raise.bind(fence),
      all: fence.all.bind(fence),
      close: async () => undefined,
    };
    let stale = true;
    const bFence = { ...staleOnce, current: async (t: string, sh: number) => (stale ? ((stale = false), 0) : fence.current(t, sh)) };
    const discards: Segment[] = [];
    const b = fenceStore(st.store, bFence, { onDiscard: (_t, _s, segment) => discards.push(segment) });
    const first = await a.allocate(bizTag, STEP);
    expect([first.start, first.end]).toEqual([1, STEP]);
    await rewind(st, bizTag, STEP);
    const second = await b.allocate(bizTag, STEP);
    expectDisjoint([first, second]);
    expect(discards.map((d) => [d.start, d.end])).toEqual([[1, STEP]]);
  });

  it('two processes allocating at once never raise a false alarm and never overlap', async () => {
    const tags = [uniqueName('busy'), uniqueName('busy')];
    for (const bizTag of tags) await st.store.createBiz({ bizTag, step: 100 });
    const other = await ZookeeperFence.open({ connect: env('ZK_CONNECT'), root });
    let alarms = 0;
    const hooks = { onRewind: () => void alarms++ };
    const a = fenceStore(st.store, fence, hooks);
    const b = fenceStore(st.store, other, hooks);
    try {
      const segments = await Promise.all(
        Array.from({ length: 16 }, (_, i) =>
          (async () => {
            const out: Segment[] = [];
            for (let n = 0; n < 10; n++) out.push(await (i % 2 ? a : b).allocate(tags[i % 4 < 2 ? 0 : 1]!, 100));
            return out;
          })(),
        ),
      );
      const all = segments.flat();
      for (const bizTag of tags) expectDisjoint(all.filter((s) => s.bizTag === bizTag));
      expect(alarms).toBe(0);
    } finally {
      await other.close();
    }
  });

  it('a deleted and re-created tag keeps its mark; after a failover every counter is raised to its mark at once', async () => {
    const bizTag = uniqueName('again');
    await st.store.createBiz({ bizTag, step: STEP });
    const fenced = fenceStore(st.store, fence);
    const handedOut = await fenced.allocate(bizTag, STEP);
    await st.store.deleteBiz(bizTag);
    await rewind(st, bizTag, STEP);
    await st.store.createBiz({ bizTag, step: STEP });
    expect(await raiseCountersToFences(fence, st.store)).toContainEqual({ bizTag, shard: 0, counter: 0, fence: handedOut.end });
    let alarms = 0;
    const next = await fenceStore(st.store, fence, { onRewind: () => void alarms++ }).allocate(bizTag, STEP);
    expect(alarms).toBe(0);
    expect(next.start).toBe(handedOut.end + 1);
  });

  it('after a failover, a counter read before another process allocated and raised its mark is no rewind', async () => {
    const bizTag = uniqueName('race');
    await st.store.createBiz({ bizTag, step: STEP });
    const fenced = fenceStore(st.store, fence);
    await fenced.allocate(bizTag, STEP);
    // The walk reads every counter first, then each mark: another process allocates in between
    // (found after a clean Patroni switchover, which counted a rewind that was none).
    const walker = {
      shardCounters: async () => {
        const counters = await st.store.shardCounters();
        await fenced.allocate(bizTag, STEP);
        return counters;
      },
      raiseShardCounter: (tag: string, shard: number, floor: number) => st.store.raiseShardCounter(tag, shard, floor),
    };
    expect((await raiseCountersToFences(fence, walker)).filter((r) => r.bizTag === bizTag)).toEqual([]);
    expect(await fence.current(bizTag, 0)).toBe(2 * STEP);
    expect((await st.store.shardCounters()).get(`${bizTag}/0`)).toBe(2 * STEP);
  });
});
