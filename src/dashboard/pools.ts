import type { BizStore } from '../core/ports.js';
import { poolKindOf, type ConcretePoolKind } from '../core/pool-kind.js';
import type { KafkaPoolSink } from '../pool/kafka/sink.js';
import type { RedisPoolMeta } from '../pool/redis/meta.js';
import type { PoolStat } from '../refill/stats.js';
import type { PoolPoint } from './store.js';

/** `/v1/stats`'s pools as dashboard points. */
export function fromPoolStats(pools: readonly PoolStat[]): PoolPoint[] {
  return pools.map((p) => ({ bizTag: p.bizTag, shard: p.shard, kind: p.kind, depth: p.depth, target: p.target, rate: p.ratePerSecond }));
}

export interface KafkaPoolReading {
  store: Pick<BizStore, 'listBiz'>;
  sink: Pick<KafkaPoolSink, 'state' | 'names'>;
  meta: Pick<RedisPoolMeta, 'target' | 'rate'>;
  /** The kind a tag with pool `auto` uses. */
  autoKind: ConcretePoolKind;
}

/** Kafka could not be read (not Postgres's tag list, not Redis's pool meta): the dashboard says Kafka is down. */
export class KafkaPoolReadError extends Error {
  constructor(cause: unknown) {
    super((cause as Error).message, { cause });
    this.name = 'KafkaPoolReadError';
  }
}

/**
 * Every Kafka pool topic: depth in IDs, and its group's lag in blocks per partition. Only a
 * failure to read Kafka is a KafkaPoolReadError; without Redis a topic is read without its target
 * and demand (they live in Redis).
 */
export async function kafkaPoolPoints(options: KafkaPoolReading): Promise<PoolPoint[]> {
  const points: PoolPoint[] = [];
  for (const tag of await options.store.listBiz()) {
    if (tag.mode !== 'segment' || poolKindOf(tag, options.autoKind) !== 'kafka') continue;
    for (let shard = 0; shard < tag.shards; shard++) {
      const [state, target, rate] = await Promise.all([
        options.sink.state(tag.bizTag, shard).catch((err: unknown) => Promise.reject(new KafkaPoolReadError(err))),
        options.meta.target(tag.bizTag, shard).catch(() => null),
        options.meta.rate(tag.bizTag, shard).catch(() => 0),
      ]);
      const lagBlocks = state?.unconsumed ?? [];
      const blockIds = state?.blockIds ?? 0;
      points.push({
        bizTag: tag.bizTag,
        shard,
        kind: 'kafka',
        depth: lagBlocks.reduce((a, b) => a + b, 0) * blockIds,
        target,
        rate,
        kafka: { topic: options.sink.names.poolTopic(tag.bizTag, shard), group: options.sink.names.poolGroup(tag.bizTag, shard), lagBlocks, blockIds },
      });
    }
  }
  return points;
}
