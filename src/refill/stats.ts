import type { BizStore, PoolSink } from '../core/ports.js';
import type { RedisPoolMeta } from '../pool/redis/meta.js';
import type { SinkKind } from './processor.js';
import type { RefillQueue } from './queue.js';
import { poolKindOf } from '../core/pool-kind.js';

export interface PoolStat {
  readonly bizTag: string;
  readonly shard: number;
  readonly kind: SinkKind;
  /** IDs ready now. */
  readonly depth: number;
  /** Depth the last refill aimed for; null before the first refill. */
  readonly target: number | null;
  /** IDs per second asked of the pool over the demand window. */
  readonly ratePerSecond: number;
}

export interface RefillStats {
  readonly pools: PoolStat[];
  /** Refill queue job counts by state; null without a queue. */
  readonly queue: Record<string, number> | null;
}

export interface RefillStatsOptions {
  store: Pick<BizStore, 'listBiz'>;
  sinks: Partial<Record<SinkKind, PoolSink>>;
  meta: RedisPoolMeta;
  queue?: RefillQueue;
  /** The kind a tag with pool `auto` uses. Default `redis-list`. */
  autoKind?: SinkKind;
}

/** What `GET /v1/stats` shows about pools and refills: one entry per pooled tag and shard. */
export async function collectRefillStats(options: RefillStatsOptions): Promise<RefillStats> {
  const { store, sinks, meta, queue } = options;
  const autoKind = options.autoKind ?? 'redis-list';
  const pools: PoolStat[] = [];
  for (const tag of await store.listBiz()) {
    if (tag.mode !== 'segment') continue;
    const kind = poolKindOf(tag, autoKind);
    if (kind === 'memory') continue;
    const sink = sinks[kind];
    if (!sink) continue;
    for (let shard = 0; shard < tag.shards; shard++) {
      const [depth, target, ratePerSecond] = await Promise.all([sink.depth(tag.bizTag, shard), meta.target(tag.bizTag, shard), meta.rate(tag.bizTag, shard)]);
      pools.push({ bizTag: tag.bizTag, shard, kind, depth, target, ratePerSecond });
    }
  }
  return { pools, queue: queue ? await queue.counts() : null };
}
