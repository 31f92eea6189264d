import { Registry } from 'prom-client';
import type { PoolSink, Segment } from '../../core/ports.js';
import type { Logger } from '../../core/logger.js';
import { silentLogger } from '../../core/logger.js';
import { encodePoolBlock } from '../../kafka/messages.js';
import { blockBytes, type SigningKey } from '../../kafka/signing.js';
import { kafkaPoolMetrics } from '../../kafka/metrics.js';
import type { KafkaPoolMetrics } from '../../kafka/metrics.js';
import { openKafka, type KafkaSource } from '../../kafka/driver.js';
import type { KafkaDriver, TopicAdmin, TopicWriter } from '../../kafka/ports.js';
import { ensureTopics, existingTopics, logUnderReplicated, underReplicated } from '../../kafka/topics.js';
import { DEFAULT_POOL_PARTITIONS, kafkaNames, type KafkaNames, POOL_TOPIC_CONFIGS } from '../../kafka/names.js';
import { checkInteger, resolveOptions } from '../../core/options.js';
import { IdmintError } from '../../core/errors.js';
import { retry } from '../../core/retry.js';
import { traceBlocksSend } from '../../tracing/messaging.js';
import type { HeaderRecord } from '../../tracing/propagation.js';

/**
 * Kafka pool topics: a refill publishes a fresh segment as blocks `{start,end}` to
 * `idmint.ids.<tag>`; SDK consumers (KafkaPoolConsumer) take them through group `idmint.pool.<tag>`
 * (`idmint.<namespace>.ids.<tag>` and `idmint.<namespace>.pool.<tag>` in a namespace).
 *
 * How they scale with consumers: a topic has `partitions` partitions (16 by default, raised on an
 * existing topic that has fewer), each owned by one consumer of the group, so up to that many SDK
 * instances read a tag's pool at once; an instance beyond it is assigned none and is served by its
 * fallback transport (request/reply or HTTP) for the same tag. A segment is cut into blocks that
 * grow with it (about two per partition, `blockSize` to `maxBlockSize` IDs) and each block goes to
 * the partition with the fewest unconsumed blocks, so the consumers that take most are refilled most.
 */

export interface KafkaPoolSinkSettings {
  /** Fewest IDs per block (a small segment is one block of this size or less). */
  blockSize: number;
  /** Most IDs per block: an SDK instance killed with blocks in hand loses at most a few of these. */
  maxBlockSize: number;
  /** Partitions of a pool topic: the most SDK instances that read one tag's pool at once. */
  partitions: number;
}

export const KAFKA_POOL_SINK_DEFAULTS: Readonly<KafkaPoolSinkSettings> = Object.freeze({
  blockSize: 1000,
  maxBlockSize: 1_000_000,
  partitions: DEFAULT_POOL_PARTITIONS,
});

export interface KafkaPoolSinkOptions extends Partial<KafkaPoolSinkSettings> {
  /** The brokers (or a ready driver); the driver is loaded at the first push or read. */
  kafka: KafkaSource;
  /**
   * The deployment's signing key, read at each push (a rotation lands without a restart): every
   * block is signed over its place. Undefined while this process may not sign (its key differs
   * from the deployment record): pushes then fail, and other refill workers fill the pools.
   */
  signer: () => SigningKey | undefined;
  /** Replication factor of the pool topics it creates (IDMINT_KAFKA_REPLICATION_FACTOR). Default min(3, brokers). */
  replicationFactor?: number | undefined;
  /** The deployment's Kafka namespace (IDMINT_KAFKA_NAMESPACE). Default none: `idmint.ids.<tag>`. */
  namespace?: string | undefined;
  logger?: Logger;
  registry?: Registry;
}

/** A pool topic's state in blocks: unconsumed per partition, and committed offsets summed (grows as consumers take). */
export interface PoolTopicState {
  readonly unconsumed: number[];
  readonly committed: number;
  /** IDs per block of the latest segment published (an estimate for older blocks). */
  readonly blockIds: number;
}

export class KafkaPoolSink implements PoolSink {
  readonly kind = 'kafka' as const;
  readonly settings: Readonly<KafkaPoolSinkSettings>;
  /** Its pool topics' and groups' names. */
  readonly names: KafkaNames;
  private readonly logger: Logger;
  private readonly metrics: KafkaPoolMetrics;
  private readonly kafka: KafkaSource;
  private driver: Promise<KafkaDriver> | undefined;
  private admin: TopicAdmin | undefined;
  private producer: TopicWriter | undefined;
  private readonly signer: () => SigningKey | undefined;
  private readonly namespace: string;
  private readonly replicationFactor: number | undefined;
  private readonly ready = new Set<string>();
  /** The last sequence given per topic and partition (see nextSeq). */
  private readonly seqs = new Map<string, Map<number, number>>();
  /** IDs per block of the latest push, per topic: depth is counted in blocks. */
  private readonly blockIds = new Map<string, number>();
  private connecting: Promise<void> | undefined;

  constructor(options: KafkaPoolSinkOptions) {
    this.settings = resolveOptions(
      KAFKA_POOL_SINK_DEFAULTS,
      { blockSize: options.blockSize, maxBlockSize: options.maxBlockSize, partitions: options.partitions },
      (s) => {
        checkInteger('KafkaPoolSink', s, 'blockSize', 1);
        checkInteger('KafkaPoolSink', s, 'maxBlockSize', s.blockSize);
        checkInteger('KafkaPoolSink', s, 'partitions', 1, 10_000);
      },
    );
    this.logger = (options.logger ?? silentLogger).child({ component: 'kafka-pool-sink' });
    this.metrics = kafkaPoolMetrics(options.registry ?? new Registry());
    this.kafka = options.kafka;
    this.signer = options.signer;
    this.namespace = options.namespace ?? '';
    this.replicationFactor = options.replicationFactor;
    this.names = kafkaNames(options.namespace);
  }

  /**
   * A block's sequence along its partition: its first ID, or one above the last this sink gave
   * there when a block of a lower segment is appended after a higher one's (concurrent pushes).
   * A consumer takes a block only above the last sequence taken from the partition, so a copy is
   * dropped; the sequence never passes the next segment's first ID, so a restarted sink's blocks
   * still rise. Pushes of one topic are appended in the order they take their sequences.
   */
  private nextSeq(topic: string, partition: number, start: number): number {
    let last = this.seqs.get(topic);
    if (!last) this.seqs.set(topic, (last = new Map()));
    const seq = Math.max(start, (last.get(partition) ?? 0) + 1);
    last.set(partition, seq);
    return seq;
  }

  /** IDs per block for a segment of `length` IDs: about two blocks per partition, within [blockSize, maxBlockSize]. */
  blockIdsFor(length: number): number {
    const { blockSize, maxBlockSize, partitions } = this.settings;
    return Math.min(maxBlockSize, Math.max(blockSize, Math.ceil(length / (2 * partitions))));
  }

  /** Publishes the segment as blocks. One send: a failed push publishes nothing usable twice, since a retry takes a new segment. */
  async push(segment: Segment): Promise<void> {
    const key = this.signer();
    if (!key)
      throw new IdmintError('NOT_READY', 'this refill has no signing key the deployment accepts (see /readyz): its blocks would be dropped by every consumer');
    const topic = this.names.poolTopic(segment.bizTag, segment.shard);
    await this.ensureTopic(topic);
    const per = this.blockIdsFor(segment.end - segment.start + 1);
    const state = await this.state(segment.bizTag, segment.shard);
    // Every partition ensureTopic made sure of, even one the offsets did not name.
    const load = Array.from({ length: Math.max(this.settings.partitions, state?.unconsumed.length ?? 0) }, (_, i) => state?.unconsumed[i] ?? 0);
    const messages: Array<{ partition: number; value: Buffer | string; headers?: HeaderRecord }> = [];
    const at = Date.now();
    for (let start = segment.start; start <= segment.end; start += per) {
      const end = Math.min(segment.end, start + per - 1);
      // The partition with the fewest unconsumed blocks: its consumer is the one running dry.
      const partition = load.indexOf(Math.min(...load));
      load[partition]! += 1;
      const seq = this.nextSeq(topic, partition, start);
      const place = {
        namespace: this.namespace,
        topic,
        partition,
        seq: String(seq),
        at: String(at),
        bizTag: segment.bizTag,
        shard: segment.shard,
        start: String(start),
        end: String(end),
      };
      messages.push({
        partition,
        value: encodePoolBlock(segment.bizTag, start, end, { shard: segment.shard, seq, at, signature: { kid: key.kid, sig: key.sign(blockBytes(place)) } }),
      });
    }
    try {
      const writer = await this.writer();
      await traceBlocksSend(topic, messages, () => writer.send(topic, messages));
    } catch (err) {
      // Check the topic again before the next push (deleted, or partitions not yet hosted).
      this.ready.delete(topic);
      throw err;
    }
    this.blockIds.set(topic, per);
    this.metrics.blocks.inc({ biz_tag: segment.bizTag }, messages.length);
    this.logger.debug({ topic, start: segment.start, end: segment.end, blocks: messages.length, blockIds: per }, 'segment published');
  }

  /**
   * Unconsumed IDs: (end offset - the pool group's committed offset) per partition, times the
   * IDs per block of the latest segment. Exact while segments are cut into equal blocks; an
   * estimate after the block size changed (it grows with demand).
   */
  async depth(bizTag: string, shard: number): Promise<number> {
    const state = await this.state(bizTag, shard);
    const depth = state ? state.unconsumed.reduce((a, b) => a + b, 0) * state.blockIds : 0;
    this.metrics.depth.set({ biz_tag: bizTag }, depth);
    return depth;
  }

  /** The topic's offsets in blocks, or null when it does not exist yet. */
  async state(bizTag: string, shard: number): Promise<PoolTopicState | null> {
    const topic = this.names.poolTopic(bizTag, shard);
    const admin = await this.connect();
    // A topic this sink made or found is not listed again (a listing fails whole while any partition in the cluster has no leader).
    if (!this.ready.has(topic) && !(await existingTopics(admin, [topic])).has(topic)) return null;
    const [ends, committed] = await Promise.all([admin.topicOffsets(topic), admin.committedOffsets(this.names.poolGroup(bizTag, shard), topic)]);
    const done = new Map(committed.map((p) => [p.partition, Number(p.offset)]));
    const unconsumed: number[] = [];
    let sum = 0;
    for (const p of ends) {
      const from = Math.max(Number(p.low), done.get(p.partition) ?? -1);
      unconsumed[p.partition] = Math.max(0, Number(p.high) - from);
      sum += from;
    }
    for (let i = 0; i < unconsumed.length; i++) unconsumed[i] ??= 0;
    return { unconsumed, committed: sum, blockIds: this.blockIds.get(topic) ?? this.settings.blockSize };
  }

  /**
   * A deleted tag's pool: nothing is deleted. Its topics' blocks expire within a day
   * (POOL_TOPIC_CONFIGS), and its groups keep their committed offsets and floors, so a block
   * copied into the topic of a tag re-created later is still dropped (a deleted topic and group
   * would take the floors with them). What was unconsumed is served if the tag comes back (those
   * IDs were never handed out), or expires.
   */
  async remove(bizTag: string): Promise<void> {
    this.metrics.depth.remove({ biz_tag: bizTag });
    this.logger.info({ bizTag }, "a deleted tag's Kafka pool is left to expire (its group keeps the floors that drop replays)");
  }

  /** Deletes the tag's pool topics (every shard) and its consumer groups: for tests and operators who know no copy of its blocks is kept. */
  async deleteTopics(bizTag: string): Promise<void> {
    const admin = await this.connect();
    const base = this.names.poolTopic(bizTag);
    const topics = (await admin.listTopics()).filter((t) => t === base || t.startsWith(`${base}.S`));
    if (topics.length > 0) await admin.deleteTopics(topics);
    const groups = [this.names.poolGroup(bizTag), ...topics.filter((t) => t !== base).map((t) => `${this.names.poolGroup(bizTag)}${t.slice(base.length)}`)];
    await admin.deleteGroups(groups).catch((err: unknown) => this.logger.debug({ err, groups }, 'pool groups not deleted (none, or still active)'));
    for (const t of topics) this.ready.delete(t);
    this.seqs.delete(base);
    this.metrics.depth.remove({ biz_tag: bizTag });
    this.logger.info({ bizTag, topics }, 'Kafka pool topics deleted');
  }

  async close(): Promise<void> {
    await this.producer?.close();
    await this.admin?.close();
  }

  /** The driver, loaded on first use; a failed load is forgotten, so the next refill tries again. */
  private open(): Promise<KafkaDriver> {
    this.driver ??= openKafka(this.kafka, this.logger).catch((err: unknown) => {
      this.driver = undefined;
      throw err;
    });
    return this.driver;
  }

  private async connect(): Promise<TopicAdmin> {
    this.admin ??= (await this.open()).admin();
    await this.admin.connect();
    return this.admin;
  }

  /**
   * Appends once: a block is never appended twice (two consumers would share its IDs). Never
   * resent: a failed push is retried by the refill with a new segment.
   */
  private async writer(): Promise<TopicWriter> {
    this.producer ??= (await this.open()).writer({ appendOnce: true });
    return this.producer;
  }

  /** Creates the topic, or raises an existing one's partitions to the setting (Kafka never lowers them). */
  private async ensureTopic(topic: string): Promise<void> {
    if (this.ready.has(topic)) return;
    const admin = await this.connect();
    const { partitions } = this.settings;
    const created = await ensureTopics(admin, [{ topic, numPartitions: partitions, configs: { ...POOL_TOPIC_CONFIGS } }], this.replicationFactor);
    if (created.length > 0) this.logger.info({ topic, partitions }, 'pool topic created');
    else {
      logUnderReplicated(this.logger, await underReplicated(admin, [topic], this.replicationFactor));
      const meta = await admin.topicMetadata([topic]);
      const has = meta[0]?.partitions.length ?? partitions;
      if (has < partitions) {
        await admin.createPartitions(topic, partitions).catch((err: unknown) => {
          // Another refill raised it meanwhile: fine; anything else leaves the topic as it was, still usable.
          this.logger.warn({ err, topic, has, partitions }, "could not raise the pool topic's partitions; consumers beyond its count use their fallback");
        });
        this.logger.info({ topic, from: has, to: partitions }, 'pool topic partitions raised');
        this.producer?.refresh();
      }
    }
    await this.untilHosted(topic);
    this.ready.add(topic);
  }

  /**
   * Waits until the broker serves every partition of the topic (its offsets answer): a topic or
   * partitions created a moment ago are in the metadata before their logs exist, and a produce
   * to them fails with "This server does not host this topic-partition".
   */
  private async untilHosted(topic: string): Promise<void> {
    await retry(
      async () => {
        const admin = await this.connect();
        const offsets = await admin.topicOffsets(topic);
        const meta = await admin.topicMetadata([topic]);
        const partitions = meta[0]?.partitions ?? [];
        if (offsets.length === partitions.length && partitions.length > 0 && partitions.every((p) => p.leader >= 0)) return;
        throw new IdmintError('NOT_READY', `Kafka pool topic ${topic} has partitions without a leader after 30 s`);
      },
      // Any failure: the last one is thrown at the deadline.
      { what: `waiting for the pool topic ${topic}`, retriable: () => true, timeoutMs: 30_000, initialMs: 50, maxMs: 1000 },
    );
  }
}
