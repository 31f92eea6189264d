import { IdmintError } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/logger.js';
import type { BizStore, Segment } from '../core/ports.js';
import { traceFenceClaim, traceSegmentAllocation } from '../tracing/segment.js';

/**
 * A record, outside Postgres, of the highest ID of each tag's (and shard's) segments handed out:
 * it does not fail over with Postgres, so a promoted replica that lost the last commits (an
 * asynchronous failover) cannot hand out those segments again.
 */
export interface SegmentFence {
  /**
   * The tag's high-water mark as of now (0 when none was ever recorded): every segment recorded
   * before this call returned is at or below it. Must not return a stale value that misses a
   * completed `raise`, or a rewind can go unnoticed.
   */
  current(bizTag: string, shard: number): Promise<number>;
  /** Raises the mark to `end` (never lowers it). Returns once the raise is durable. */
  raise(bizTag: string, shard: number, end: number): Promise<void>;
  /**
   * Raises the mark to `end` only if it is below `start`, in one atomic step; false (nothing
   * written) when the mark is already at or above `start`. Two segments that overlap can never
   * both be claimed: whichever claims first leaves the mark at or above the other's start.
   */
  claim(bizTag: string, shard: number, start: number, end: number): Promise<boolean>;
  /** Every recorded mark, for the check after a failover. */
  all(): Promise<Array<{ bizTag: string; shard: number; end: number }>>;
  /** Whether marks can be read and claimed now (for /readyz). */
  health?(): { ok: boolean; message?: string };
  close(): Promise<void>;
}

/** What the fence needs of the store besides `allocate`: read the counters, move one up past a mark. */
export interface CounterRaiser {
  /**
   * Raises the shard's counter to at least `floor` (never lowers it); the next segment starts above
   * it. The counter it had when it was below `floor`, else undefined (nothing to raise).
   */
  raiseShardCounter(bizTag: string, shard: number, floor: number): Promise<number | undefined>;
  /** Every shard's counter, keyed `<bizTag>/<shard>`. */
  shardCounters(): Promise<Map<string, number>>;
}

export interface FenceHooks {
  /** Counted as `idmint_segment_rewinds_total{biz_tag}`. */
  onRewind?: (bizTag: string, shard: number, segment: Segment, fence: number) => void;
  /** A segment whose claim failed (the fence passed its start while it was allocated): discarded, a gap. */
  onDiscard?: (bizTag: string, shard: number, segment: Segment) => void;
  logger?: Logger;
}

/** How many rewinds in a row one allocation repairs before giving up (one raise suffices unless the counter is being lowered meanwhile). */
const MAX_REPAIRS = 3;
/** How many segments one allocation may lose to concurrent claims above them before it gives up (each loss needs a new allocation above it meanwhile). */
const MAX_DISCARDS = 10;

/**
 * Wraps a store so no segment is handed out unless it was claimed in the fence, above every
 * segment claimed before it:
 *
 * 1. read the mark F (linearizable: every claim that completed before is included);
 * 2. allocate in Postgres;
 * 3. a segment starting at or below F is a rewind: Postgres lost a commit whose segment was
 *    already fenced (handed out). It is discarded, the counter is raised past F, and 1-3 repeat;
 * 4. claim the segment: raise the mark to its end only if the mark is still below its start, in
 *    one atomic step (a version-checked write). Then return it.
 *
 * Why 3 is exact: a mark F is only ever written after its segment committed in Postgres, and a
 * Postgres that lost nothing never moves a counter down, so any allocation that starts after F
 * was read begins above F (no false alarms).
 *
 * Why 4 is needed: F can be read before a failover and the allocation made after it. Another
 * process may have claimed [a, b] and handed it out after F was read; the failover loses that
 * commit, and this allocation returns [a, b] again, above the stale F. A plain raise would let
 * both hand it out. The claim refuses the second, so two overlapping segments can never both
 * leave. It refuses a legitimate segment too when a concurrent allocation above it claimed
 * first: that segment is discarded (a gap, logged at debug) and another taken.
 */
export function fenceStore<S extends BizStore & CounterRaiser>(store: S, fence: SegmentFence, hooks: FenceHooks = {}): S {
  const log = (hooks.logger ?? silentLogger).child({ component: 'segment-fence' });
  const allocate = (bizTag: string, step: number, options: { shard?: number; by?: string } = {}): Promise<Segment> =>
    traceSegmentAllocation(bizTag, options.shard ?? 0, step, () => allocateFenced(bizTag, step, options));
  const allocateFenced = async (bizTag: string, step: number, options: { shard?: number; by?: string }): Promise<Segment> => {
    const shard = options.shard ?? 0;
    let discards = 0;
    let repairs = 0;
    for (;;) {
      const mark = await fence.current(bizTag, shard);
      const segment = await store.allocate(bizTag, step, options);
      if (segment.start > mark) {
        if (await traceFenceClaim(bizTag, shard, mark, () => fence.claim(bizTag, shard, segment.start, segment.end))) return segment;
        // Claimed above its start meanwhile: a concurrent allocation above it, or the segment a
        // lost commit had handed out. Either way this one must not leave; take another.
        log.debug(
          { bizTag, shard, segment: [segment.start, segment.end], fence: mark },
          'segment discarded: the fence was raised past its start while it was allocated',
        );
        hooks.onDiscard?.(bizTag, shard, segment);
        if (++discards > MAX_DISCARDS) {
          throw new IdmintError('NOT_READY', `the segment fence of "${bizTag}" shard ${shard} refused ${discards} segments in a row; try again`, {
            details: { bizTag, shard, fence: mark },
          });
        }
        continue;
      }
      hooks.onRewind?.(bizTag, shard, segment, mark);
      log.error(
        { bizTag, shard, segment: [segment.start, segment.end], fence: mark },
        'Postgres handed out a segment at or below the fence: its counter was rewound (a failover lost commits, or it was lowered by hand). The segment is discarded and the counter raised past the fence',
      );
      if (repairs >= MAX_REPAIRS) {
        throw new IdmintError(
          'NOT_READY',
          `the segment counter of "${bizTag}" shard ${shard} keeps falling below its fence ${mark}; refusing to hand out segments`,
          {
            details: { bizTag, shard, fence: mark },
          },
        );
      }
      repairs++;
      await store.raiseShardCounter(bizTag, shard, mark);
    }
  };
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'allocate') return allocate;
      const value: unknown = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/**
 * After a failover (a new timeline or system): raises every counter of this database that is
 * below its mark before any segment is taken, so the first allocations on the new primary need no
 * repair. Each rewound counter is reported to `onRewound` as it is raised; returns them all.
 * Walks this database's counters (not every mark in ZooKeeper, which other deployments may share).
 */
export async function raiseCountersToFences(
  fence: SegmentFence,
  store: CounterRaiser,
  onRewound: (r: { bizTag: string; shard: number; counter: number; fence: number }) => void = () => undefined,
): Promise<Array<{ bizTag: string; shard: number; counter: number; fence: number }>> {
  const rewound: Array<{ bizTag: string; shard: number; counter: number; fence: number }> = [];
  for (const [key, counter] of await store.shardCounters()) {
    const cut = key.lastIndexOf('/');
    const bizTag = key.slice(0, cut);
    const shard = Number(key.slice(cut + 1));
    const mark = await fence.current(bizTag, shard);
    if (counter >= mark) continue;
    // The counter was read before the mark: another process may have allocated and raised the
    // mark in between. Only a counter still below the mark now has lost commits.
    const before = await store.raiseShardCounter(bizTag, shard, mark);
    if (before === undefined) continue;
    const r = { bizTag, shard, counter: before, fence: mark };
    rewound.push(r);
    onRewound(r);
  }
  return rewound;
}
