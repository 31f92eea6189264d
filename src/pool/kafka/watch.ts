import type { BizStore, BizTag, DemandStore, RefillTrigger } from '../../core/ports.js';
import { silentLogger, type Logger } from '../../core/logger.js';
import { poolKindOf, type ConcretePoolKind } from '../../core/pool-kind.js';
import { checkInteger, defaults, resolveOptions } from '../../core/options.js';
import type { KafkaPoolSink } from './sink.js';

/**
 * Demand for Kafka pool topics. Their consumers live in the SDK, which has no Redis: nothing
 * records what they take and nothing asks for a refill when they run low, so only the cron
 * sweep refilled them (one segment of the tag's step per sweep). The refill role runs this
 * watch: every `everyMs` it reads each Kafka-pooled tag's committed offsets, records the IDs
 * taken since the last reading as the pool's demand (the rate the refill sizes targets by, as
 * for Redis pools) and asks for a threshold refill when the depth is under the threshold — a
 * surge is met within a tick or two, not at the next sweep. One process of many takes each tick
 * (the DemandStore's lease), and the last reading is kept there, so demand is counted once.
 */
export interface KafkaPoolWatchOptions {
  sink: Pick<KafkaPoolSink, 'state'>;
  store: Pick<BizStore, 'listBiz'>;
  /** Where the demand and the last reading are kept, shared by the refill processes (RedisPoolMeta). */
  meta: DemandStore;
  trigger: RefillTrigger;
  /** The kind a tag with pool `auto` uses (a Kafka-pooled deployment may make it `kafka`). */
  autoKind: ConcretePoolKind;
  /** Between two readings. Default 1000. */
  everyMs?: number;
  /** The tag list is reloaded this often. Default 10,000. */
  tagsEveryMs?: number;
  /** Refill when depth < thresholdRatio × target. Default 0.2. */
  thresholdRatio?: number;
  /** The target before the refill chose one. Default 1000. */
  minDepth?: number;
  logger?: Logger;
}

export const KAFKA_POOL_WATCH_DEFAULTS = defaults({ everyMs: 1000, tagsEveryMs: 10_000, thresholdRatio: 0.2, minDepth: 1000 });

const COMMITTED_FIELD = 'kafkaCommitted';
const AT_FIELD = 'kafkaReadAt';
/** How much more than it took a drained topic's consumers are assumed to want. */
export const SUPPLY_LIMITED_FACTOR = 4;

export class KafkaPoolWatch {
  private readonly settings: typeof KAFKA_POOL_WATCH_DEFAULTS;
  private readonly options: KafkaPoolWatchOptions;
  private readonly logger: Logger;
  private timer: NodeJS.Timeout | undefined;
  private tags: BizTag[] = [];
  private tagsAt = 0;
  private running: Promise<void> | undefined;
  private failing = false;

  constructor(options: KafkaPoolWatchOptions) {
    const { everyMs, tagsEveryMs, thresholdRatio, minDepth } = options;
    this.settings = resolveOptions(KAFKA_POOL_WATCH_DEFAULTS, { everyMs, tagsEveryMs, thresholdRatio, minDepth }, (s) => {
      checkInteger('KafkaPoolWatch', s, 'everyMs', 10);
      checkInteger('KafkaPoolWatch', s, 'tagsEveryMs', 10);
      checkInteger('KafkaPoolWatch', s, 'minDepth', 1);
    });
    this.options = options;
    this.logger = (options.logger ?? silentLogger).child({ component: 'kafka-pool-watch' });
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      this.running ??= this.tick()
        .then(() => undefined)
        .finally(() => (this.running = undefined));
    }, this.settings.everyMs);
    this.timer.unref();
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** One reading of every Kafka-pooled tag (when this process holds the tick's lease). Returns the refills asked for. */
  async tick(): Promise<Array<{ bizTag: string; shard: number; depth: number; target: number }>> {
    const asked: Array<{ bizTag: string; shard: number; depth: number; target: number }> = [];
    try {
      if (!(await this.options.meta.lease('kafka-pool-watch', Math.max(10, this.settings.everyMs - 50)))) return asked;
      for (const tag of await this.kafkaTags()) {
        for (let shard = 0; shard < tag.shards; shard++) {
          const state = await this.options.sink.state(tag.bizTag, shard);
          if (!state) continue;
          const now = Date.now();
          const last = await this.options.meta.swap(tag.bizTag, shard, { [COMMITTED_FIELD]: state.committed, [AT_FIELD]: now });
          const before = last[COMMITTED_FIELD];
          const at = last[AT_FIELD];
          const taken = before === null ? 0 : Math.max(0, state.committed - before) * state.blockIds;
          const depth = state.unconsumed.reduce((a, b) => a + b, 0) * state.blockIds;
          if (taken > 0) {
            await this.options.meta.record(tag.bizTag, shard, taken);
            // The rate since the last reading: a jump in demand is sized for at the next refill, not
            // after a bucket. A drained topic only shows what it had, not what was asked: size for
            // SUPPLY_LIMITED_FACTOR times it, so a step in demand is met in two or three readings.
            if (at !== null && now > at) {
              const rate = taken / ((now - at) / 1000);
              await this.options.meta.recordBurst(tag.bizTag, shard, depth === 0 ? rate * SUPPLY_LIMITED_FACTOR : rate);
            }
          }
          const target = (await this.options.meta.target(tag.bizTag, shard)) ?? this.settings.minDepth;
          if (depth >= target * this.settings.thresholdRatio) continue;
          await this.options.trigger.requestRefill(tag.bizTag, shard, 'threshold');
          asked.push({ bizTag: tag.bizTag, shard, depth, target });
        }
      }
      if (this.failing) this.logger.info('Kafka pool watch recovered');
      this.failing = false;
    } catch (err) {
      // One line per outage: the sweep still refills meanwhile.
      if (!this.failing) this.logger.warn({ err: (err as Error).message }, 'Kafka pool watch failed; retrying every tick');
      this.failing = true;
    }
    return asked;
  }

  private async kafkaTags(): Promise<BizTag[]> {
    if (Date.now() - this.tagsAt >= this.settings.tagsEveryMs) {
      const all = await this.options.store.listBiz();
      this.tags = all.filter((t) => t.mode === 'segment' && poolKindOf(t, this.options.autoKind) === 'kafka');
      this.tagsAt = Date.now();
    }
    return this.tags;
  }
}
