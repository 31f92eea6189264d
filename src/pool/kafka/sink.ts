import type { Admin, Kafka } from 'kafkajs';
import { Registry } from 'prom-client';
import type { PoolSink, Segment } from '../../core/ports.js';
import type { Logger } from '../../core/logger.js';
import { silentLogger } from '../../core/logger.js';
import { encodePoolBlock } from '../../kafka/messages.js';
import { kafkaPoolMetrics } from '../../kafka/metrics.js';
import type { KafkaPoolMetrics } from '../../kafka/metrics.js';
import { TopicProducer, isUnknownTopic } from '../../kafka/producer.js';
import { ensureTopics, POOL_TOPIC_CONFIGS, poolGroup, poolTopic } from '../../kafka/topics.js';
import { checkInteger, resolveOptions } from '../../core/options.js';

/**
 * Kafka pool topics: a refill publishes a fresh segment as blocks `{start,end}` to
 * `idmint.ids.<tag>`; SDK consumers (KafkaPoolConsumer) take them through group `idmint.pool.<tag>`.
 */

export interface KafkaPoolSinkSettings {
  /** IDs per block; a segment is split into blocks of at most this many. */
  blockSize: number;
  /** Partitions of a pool topic created on first push; each SDK consumer of a tag can own one. */
  partitions: number;
}

export const KAFKA_POOL_SINK_DEFAULTS: Readonly<KafkaPoolSinkSettings> = Object.freeze({ blockSize: 1000, partitions: 2 });

export interface KafkaPoolSinkOptions extends Partial<KafkaPoolSinkSettings> {
  kafka: Kafka;
  logger?: Logger;
  registry?: Registry;
}

export class KafkaPoolSink implements PoolSink {
  readonly kind = 'kafka' as const;
  readonly settings: Readonly<KafkaPoolSinkSettings>;
  private readonly logger: Logger;
  private readonly metrics: KafkaPoolMetrics;
  private admin: Admin;
  private readonly kafka: Kafka;
  private readonly producer: TopicProducer;
  private readonly ready = new Set<string>();
  private connecting: Promise<void> | undefined;

  constructor(options: KafkaPoolSinkOptions) {
    this.settings = resolveOptions(KAFKA_POOL_SINK_DEFAULTS, { blockSize: options.blockSize, partitions: options.partitions }, (s) => {
      checkInteger('KafkaPoolSink', s, 'blockSize', 1);
      checkInteger('KafkaPoolSink', s, 'partitions', 1);
    });
    this.logger = (options.logger ?? silentLogger).child({ component: 'kafka-pool-sink' });
    this.metrics = kafkaPoolMetrics(options.registry ?? new Registry());
    this.kafka = options.kafka;
    this.admin = options.kafka.admin();
    // Idempotent: a send retried after a lost ack must not append a block twice (two consumers would share its IDs).
    this.producer = new TopicProducer(options.kafka, this.logger, { idempotent: true, maxInFlightRequests: 1 });
  }

  /** Publishes the segment as blocks. One send: a failed push publishes nothing usable twice, since a retry takes a new segment. */
  async push(segment: Segment): Promise<void> {
    const topic = poolTopic(segment.bizTag, segment.shard);
    await this.ensureTopic(topic);
    const messages = [];
    for (let start = segment.start; start <= segment.end; start += this.settings.blockSize) {
      const end = Math.min(segment.end, start + this.settings.blockSize - 1);
      messages.push({ value: encodePoolBlock(segment.bizTag, start, end) });
    }
    await this.producer.send(topic, messages);
    this.metrics.blocks.inc({ biz_tag: segment.bizTag }, messages.length);
    this.logger.debug({ topic, start: segment.start, end: segment.end, blocks: messages.length }, 'segment published');
  }

  /**
   * Unconsumed IDs: (end offset - the pool group's committed offset) per partition, times the
   * block size. Exact when segments are multiples of the block size; an upper bound otherwise.
   */
  async depth(bizTag: string, shard: number): Promise<number> {
    const topic = poolTopic(bizTag, shard);
    const offsets = await this.withAdmin(async (admin) => {
      if (!(await admin.listTopics()).includes(topic)) return null;
      return Promise.all([admin.fetchTopicOffsets(topic), admin.fetchOffsets({ groupId: poolGroup(bizTag, shard), topics: [topic] })]);
    });
    if (!offsets) return 0;
    const [ends, committed] = offsets;
    const done = new Map((committed[0]?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
    let blocks = 0;
    for (const p of ends) {
      const from = Math.max(Number(p.low), done.get(p.partition) ?? -1);
      blocks += Math.max(0, Number(p.high) - from);
    }
    const depth = blocks * this.settings.blockSize;
    this.metrics.depth.set({ biz_tag: bizTag }, depth);
    return depth;
  }

  /** Deletes the tag's pool topics (every shard) and its consumer groups; unconsumed IDs are dropped, never reused. */
  async remove(bizTag: string): Promise<void> {
    await this.connect();
    const base = poolTopic(bizTag);
    const topics = (await this.admin.listTopics()).filter((t) => t === base || t.startsWith(`${base}.S`));
    if (topics.length > 0) await this.admin.deleteTopics({ topics });
    const groups = [poolGroup(bizTag), ...topics.filter((t) => t !== base).map((t) => `${poolGroup(bizTag)}${t.slice(base.length)}`)];
    await this.admin.deleteGroups(groups).catch((err: unknown) => this.logger.debug({ err, groups }, 'pool groups not deleted (none, or still active)'));
    for (const t of topics) this.ready.delete(t);
    this.metrics.depth.remove({ biz_tag: bizTag });
    this.logger.info({ bizTag, topics }, 'Kafka pool removed');
  }

  async close(): Promise<void> {
    await this.producer.close();
    await this.admin.disconnect();
  }

  private connect(): Promise<void> {
    // A failed connect is forgotten, so the next refill tries again instead of failing forever.
    this.connecting ??= this.admin.connect().catch((err: unknown) => {
      this.connecting = undefined;
      throw err;
    });
    return this.connecting;
  }

  /**
   * Like the producer (see TopicProducer), a KafkaJS admin that has read a topic's offsets
   * fails every later metadata refresh once that topic is deleted elsewhere: replace it, retry once.
   */
  private async withAdmin<T>(fn: (admin: Admin) => Promise<T>): Promise<T> {
    await this.connect();
    try {
      return await fn(this.admin);
    } catch (err) {
      if (!isUnknownTopic(err)) throw err;
      const old = this.admin;
      this.admin = this.kafka.admin();
      this.connecting = undefined;
      await old.disconnect().catch(() => undefined);
      await this.connect();
      return fn(this.admin);
    }
  }

  private async ensureTopic(topic: string): Promise<void> {
    if (this.ready.has(topic)) return;
    await this.connect();
    const created = await ensureTopics(this.admin, [{ topic, numPartitions: this.settings.partitions, configs: { ...POOL_TOPIC_CONFIGS } }]);
    if (created.length > 0) this.logger.info({ topic, partitions: this.settings.partitions }, 'pool topic created');
    this.ready.add(topic);
  }
}
