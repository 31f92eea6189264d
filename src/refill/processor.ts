import { hostname } from 'node:os';
import type { Registry } from 'prom-client';
import { IdmintError } from '../core/errors.js';
import { MAX_STEP, type BizStore, type BizTag, type PoolSink, type Segment } from '../core/ports.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { sleep } from '../core/retry.js';
import type { RefillReason, RefillTrigger } from '../core/ports.js';
import type { RedisPoolMeta } from '../pool/redis/meta.js';
import { refillMetrics, type RefillMetrics } from './metrics.js';
import { targetDepth } from './target.js';
import { defaults, OptionsError, resolveOptions } from '../core/options.js';
import { poolKindOf } from '../core/pool-kind.js';
import { traceRefill, traceSweep, type TraceCarrier } from '../tracing/refill.js';

export type SinkKind = PoolSink['kind'];

export interface RefillJobData {
  bizTag: string;
  shard: number;
  reason: RefillReason;
  /** The W3C trace context of the request or sweep that asked (tracing on): the refill's span links to it. */
  trace?: TraceCarrier;
}

/** The part of a BullMQ job the processor reads. */
export interface RefillJobLike {
  readonly name: string;
  readonly data: unknown;
  readonly attemptsMade?: number;
}

export interface RefillProcessorOptions {
  store: Pick<BizStore, 'getBiz' | 'listBiz' | 'allocate'>;
  /** One sink per pool kind this process fills; tags whose kind has no sink are skipped. */
  sinks: Partial<Record<SinkKind, PoolSink>>;
  /** Demand, targets and the set of filled tags (Redis). */
  meta: RedisPoolMeta;
  /** Where a sweep enqueues refills; without one the sweep refills inline. */
  trigger?: RefillTrigger;
  /** The kind a tag with pool `auto` uses. Default `redis-list`. */
  autoKind?: SinkKind;
  /** Seconds a pool should last at the observed rate. Default 60. */
  poolSeconds?: number;
  /** Smallest target depth. Default 1000. */
  minDepth?: number;
  /** Largest target depth. Default 1,000,000. */
  maxDepth?: number;
  /**
   * Largest target depth of a pool that holds ranges (the counter pool): its depth costs Redis no
   * memory, only the gap a flush leaves, so a fast tag may hold more. Default: maxDepth.
   */
  maxRangeDepth?: number;
  /** Refill when depth < thresholdRatio × target. Default 0.2 (same as the pools'). */
  thresholdRatio?: number;
  /** Largest segment taken in one allocation: a crash loses at most this many IDs. Default 100,000. */
  maxSegment?: number;
  /**
   * The same for a pool that holds ranges (the counter pool), whose targets run to tens of
   * millions: one allocation of 10 M instead of a hundred of 100 k. Default 10,000,000.
   */
  maxRangeSegment?: number;
  /** Test hook for crash tests: wait this long between taking a segment and pushing it. Default 0. */
  pauseAfterAllocateMs?: number;
  /** Recorded as `allocated_by` in the ledger. Default `refill:<hostname>:<pid>`. */
  owner?: string;
  logger?: Logger;
  registry?: Registry;
}

export const REFILL_PROCESSOR_DEFAULTS = defaults({
  autoKind: 'redis-list' as SinkKind,
  poolSeconds: 60,
  minDepth: 1000,
  maxDepth: 1_000_000,
  thresholdRatio: 0.2,
  maxSegment: 100_000,
  maxRangeSegment: 10_000_000,
  pauseAfterAllocateMs: 0,
  owner: `refill:${hostname()}:${process.pid}`,
});

export type RefillOutcome =
  | { status: 'pushed'; bizTag: string; shard: number; target: number; depthBefore: number; segments: Array<{ start: number; end: number }> }
  | { status: 'skipped'; bizTag: string; shard: number; why: string };

export interface SweepOutcome {
  checked: number;
  requested: Array<{ bizTag: string; shard: number }>;
  removed: string[];
}

export interface RefillProcessor {
  /** The BullMQ processor: `refill` and `sweep` jobs. */
  process(job: RefillJobLike): Promise<RefillOutcome | SweepOutcome>;
  /** Tops one pool up to its target when it is under the threshold (or always, for `manual`). */
  refill(bizTag: string, shard: number, reason: RefillReason): Promise<RefillOutcome>;
  /** Asks for refills of every active tag under threshold and drops deleted tags' pools. */
  sweep(): Promise<SweepOutcome>;
}

type Settings = typeof REFILL_PROCESSOR_DEFAULTS & { maxRangeDepth?: number };

function validate(s: Settings): void {
  const bad = (option: string, what: string) => new OptionsError('RefillProcessor', option, what);
  const posInt = (v: number) => Number.isInteger(v) && v >= 1;
  if (!(s.poolSeconds > 0)) throw bad('poolSeconds', 'must be > 0');
  if (!posInt(s.minDepth) || !posInt(s.maxDepth) || s.minDepth > s.maxDepth)
    throw bad('minDepth', 'and maxDepth must be integers with 1 <= minDepth <= maxDepth');
  if (s.maxRangeDepth !== undefined && (!posInt(s.maxRangeDepth) || s.minDepth > s.maxRangeDepth)) throw bad('maxRangeDepth', 'must be an integer >= minDepth');
  if (!(s.thresholdRatio > 0 && s.thresholdRatio <= 1)) throw bad('thresholdRatio', 'must be in (0, 1]');
  if (!posInt(s.maxSegment)) throw bad('maxSegment', 'must be an integer >= 1');
  if (!posInt(s.maxRangeSegment) || s.maxRangeSegment > MAX_STEP) throw bad('maxRangeSegment', `must be an integer in [1, ${MAX_STEP}]`);
  if (!(s.pauseAfterAllocateMs >= 0)) throw bad('pauseAfterAllocateMs', 'must be >= 0');
  if (!['redis-list', 'redis-counter', 'kafka'].includes(s.autoKind)) throw bad('autoKind', 'must be redis-list, redis-counter or kafka');
}

// Only segment tags are pooled: sharded tags encode shard and app bits in this process
// (src/dispenser/sources/sharded.ts), so a pool of raw sequence numbers would hand out colliding IDs.
const POOLED_MODES = new Set(['segment']);

// Pools that hold ranges, not IDs: a Redis counter pool, and Kafka pool topics (a block of a
// million IDs is one small message). Their depth costs nothing per ID, so targets and segments
// follow the range limits and grow with demand.
const RANGE_KINDS = new Set<string>(['redis-counter', 'kafka']);

export function createRefillProcessor(options: RefillProcessorOptions): RefillProcessor {
  const { store, sinks, meta, trigger, logger, registry, ...rest } = options;
  const settings = resolveOptions<Settings>(REFILL_PROCESSOR_DEFAULTS as Settings, rest, validate);
  const log = (logger ?? silentLogger).child({ component: 'refill' });
  const metrics: RefillMetrics | undefined = refillMetrics(registry);

  const sinkFor = (tag: BizTag): PoolSink | undefined => {
    if (!POOLED_MODES.has(tag.mode)) return undefined;
    const kind = poolKindOf(tag, settings.autoKind);
    return kind === 'memory' ? undefined : sinks[kind];
  };

  const rangeRule = { ...settings, maxDepth: settings.maxRangeDepth ?? settings.maxDepth };
  // The ring's average, or a recent burst when higher (a Kafka pool's watch measures one per reading).
  const targetFor = async (tag: BizTag, shard: number): Promise<number> => {
    const rate = Math.max(await meta.rate(tag.bizTag, shard), await meta.burstRate(tag.bizTag, shard));
    return targetDepth(rate, tag.step, RANGE_KINDS.has(poolKindOf(tag, settings.autoKind)) ? rangeRule : settings);
  };

  async function refill(bizTag: string, shard: number, reason: RefillReason): Promise<RefillOutcome> {
    const started = performance.now();
    const skipped = (why: string): RefillOutcome => {
      metrics?.refills.inc({ biz_tag: bizTag, reason, outcome: 'skipped' });
      log.debug({ bizTag, shard, reason, why }, 'refill skipped');
      return { status: 'skipped', bizTag, shard, why };
    };
    const tag = await store.getBiz(bizTag);
    if (!tag) return skipped('unknown or deleted tag');
    const sink = sinkFor(tag);
    if (!sink) return skipped(`no pool sink for mode ${tag.mode}, pool ${tag.pool}`);
    if (!Number.isInteger(shard) || shard < 0 || shard >= tag.shards) return skipped(`shard ${shard} outside [0, ${tag.shards - 1}]`);

    const target = await targetFor(tag, shard);
    await meta.setTarget(bizTag, shard, target);
    const depthBefore = await sink.depth(bizTag, shard);
    if (reason !== 'manual' && depthBefore >= target * settings.thresholdRatio) return skipped(`depth ${depthBefore} above threshold of target ${target}`);
    // Tracked before the first push, so a sweep finds this pool even if the tag is deleted mid-refill.
    await meta.track(bizTag);

    const segments: Segment[] = [];
    let pushed = 0;
    const need = target - depthBefore;
    const maxSegment = RANGE_KINDS.has(sink.kind) ? settings.maxRangeSegment : settings.maxSegment;
    try {
      while (pushed < need) {
        const size = Math.min(maxSegment, Math.max(tag.step, need - pushed));
        // Every attempt allocates afresh (invariant 3): a retry after a failed push wastes that range, never repeats it.
        const segment = await store.allocate(bizTag, size, { shard, by: settings.owner });
        metrics?.segments.inc({ biz_tag: bizTag, kind: sink.kind });
        log.info({ bizTag, shard, start: segment.start, end: segment.end, reason }, 'segment allocated for refill');
        if (settings.pauseAfterAllocateMs > 0) await sleep(settings.pauseAfterAllocateMs);
        await sink.push(segment);
        segments.push(segment);
        const n = segment.end - segment.start + 1;
        pushed += n;
        metrics?.ids.inc({ biz_tag: bizTag, kind: sink.kind }, n);
      }
    } catch (err) {
      metrics?.refills.inc({ biz_tag: bizTag, reason, outcome: 'failed' });
      log.warn({ err, bizTag, shard, reason, pushed }, 'refill failed');
      throw err;
    }
    metrics?.refills.inc({ biz_tag: bizTag, reason, outcome: 'pushed' });
    metrics?.duration.observe({ reason }, (performance.now() - started) / 1000);
    log.debug({ bizTag, shard, reason, target, depthBefore, pushed }, 'refilled');
    return { status: 'pushed', bizTag, shard, target, depthBefore, segments: segments.map(({ start, end }) => ({ start, end })) };
  }

  async function sweep(): Promise<SweepOutcome> {
    const outcome: SweepOutcome = { checked: 0, requested: [], removed: [] };
    try {
      const tags = await store.listBiz();
      for (const tag of tags) {
        const sink = sinkFor(tag);
        if (!sink) continue;
        for (let shard = 0; shard < tag.shards; shard++) {
          outcome.checked++;
          const [depth, target] = await Promise.all([sink.depth(tag.bizTag, shard), targetFor(tag, shard)]);
          if (depth >= target * settings.thresholdRatio) continue;
          outcome.requested.push({ bizTag: tag.bizTag, shard });
          if (trigger) await trigger.requestRefill(tag.bizTag, shard, 'cron');
          else await refill(tag.bizTag, shard, 'cron');
        }
      }
      const active = new Set(tags.map((t) => t.bizTag));
      for (const bizTag of await meta.tracked()) {
        if (active.has(bizTag)) continue;
        // Deleted tags: drop every kind of pool they may have had, then forget them.
        for (const sink of Object.values(sinks)) await sink?.remove(bizTag);
        await meta.untrack(bizTag);
        outcome.removed.push(bizTag);
      }
    } catch (err) {
      metrics?.sweeps.inc({ outcome: 'failed' });
      throw err;
    }
    metrics?.sweeps.inc({ outcome: 'done' });
    log.debug({ checked: outcome.checked, requested: outcome.requested.length, removed: outcome.removed }, 'sweep done');
    return outcome;
  }

  async function process(job: RefillJobLike): Promise<RefillOutcome | SweepOutcome> {
    if (job.name === 'sweep') return traceSweep(sweep);
    if (job.name !== 'refill') throw new IdmintError('BAD_REQUEST', `unknown refill job name "${job.name}"`);
    const data = job.data as Partial<RefillJobData> | null;
    if (!data || typeof data.bizTag !== 'string' || typeof data.shard !== 'number') {
      throw new IdmintError('BAD_REQUEST', 'refill job data must be {bizTag, shard, reason}', { details: { data } });
    }
    const reason: RefillReason = data.reason === 'cron' || data.reason === 'manual' ? data.reason : 'threshold';
    return traceRefill(data.bizTag, data.shard, reason, data.trace, () => refill(data.bizTag!, data.shard!, reason));
  }

  return Object.freeze({ process, refill, sweep });
}
