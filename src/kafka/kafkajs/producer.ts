import type { Kafka, Producer, ProducerConfig } from 'kafkajs';
import { Partitioners } from 'kafkajs';
import type { Logger } from '../../core/logger.js';
import { isUnknownTopic } from '../errors.js';
import type { OutgoingRecord, TopicWriter } from '../ports.js';
import { PerTopicSends, RetiredProducers } from '../writer-parts.js';

/**
 * acks=-1 on every send: the leader answers once every in-sync replica has the message, and a
 * topic's min.insync.replicas (ensureTopics: factor − 1) refuses a write fewer brokers hold. A
 * request, reply or pool block acknowledged is not lost with the broker that led its partition.
 */
export const ALL_REPLICAS = -1;

/**
 * A KafkaJS producer for many short-lived topics (reply topics, pool topics that get removed).
 * KafkaJS keeps every topic it ever sent to in its metadata set; once one is deleted, each
 * metadata refresh fails with UNKNOWN_TOPIC_OR_PARTITION and no new topic can be added. So on
 * that error the producer is replaced by a fresh one and the send retried once.
 */
export class TopicProducer implements TopicWriter {
  private producer: Producer | undefined;
  private connecting: Promise<Producer> | undefined;
  private closed = false;
  /** Replaced producers linger so sends already in flight on them can finish. */
  private readonly retired: RetiredProducers<Producer>;

  /** Sends to one topic one at a time (appendOnce). */
  private readonly sends = new PerTopicSends();

  constructor(
    private readonly kafka: Kafka,
    private readonly logger: Logger,
    private readonly config: ProducerConfig = {},
    /**
     * False (replies): after an unknown-topic error the same messages are sent again on a fresh
     * producer (a repeated reply is dropped by its request id).
     *
     * True where a message must never be appended twice (pool blocks), on an idempotent producer:
     * - Sends to one topic go one at a time. KafkaJS gives a batch its partition's next sequence
     *   number and takes it back when the request fails; a request that timed out while its
     *   leader waited for a hung follower is still appended a moment later. A second send in
     *   flight meanwhile would be given that sequence number again (and dropped by the broker as
     *   a duplicate), and the first send's retry the next one: the same blocks appended twice
     *   (reproduced: test/chaos/kafka-pool-sink-hang.test.ts). One send at a time, a retry
     *   carries its own sequence numbers and the broker drops it if the first attempt landed.
     * - A send that failed in the end replaces the producer: the sequence numbers it took back
     *   may be in the log after all, and a later send reusing them would be dropped silently
     *   (same count) or refused forever (OUT_OF_ORDER_SEQUENCE_NUMBER). A fresh producer has a
     *   new producer id. Nothing is resent: the caller publishes a new segment.
     */
    private readonly appendOnce = false,
  ) {
    this.retired = new RetiredProducers((p) => p.disconnect(), logger);
  }

  async connect(): Promise<void> {
    await this.current();
  }

  /** Sends to one topic; a deleted topic rejects with the KafkaJS error after one fresh retry (not with appendOnce). */
  send(topic: string, messages: readonly OutgoingRecord[]): Promise<void> {
    if (!this.appendOnce) return this.sendOrResend(topic, messages);
    return this.sends.run(topic, () => this.sendOnce(topic, messages));
  }

  private async sendOrResend(topic: string, messages: readonly OutgoingRecord[]): Promise<void> {
    const producer = await this.current();
    try {
      await producer.send({ topic, messages: [...messages], acks: ALL_REPLICAS });
    } catch (err) {
      if (!isUnknownTopic(err) || this.closed) throw err;
      this.logger.debug({ topic }, 'Kafka producer metadata poisoned by a deleted topic; replacing the producer');
      this.replace(producer);
      await (await this.current()).send({ topic, messages: [...messages], acks: ALL_REPLICAS });
    }
  }

  private async sendOnce(topic: string, messages: readonly OutgoingRecord[]): Promise<void> {
    const producer = await this.current();
    try {
      await producer.send({ topic, messages: [...messages], acks: ALL_REPLICAS });
    } catch (err) {
      this.logger.debug({ topic, err }, 'a send failed: the next one uses a fresh producer (new producer id, fresh sequence numbers)');
      this.replace(producer);
      throw err;
    }
  }

  /** The next send uses a fresh producer, with fresh metadata (e.g. after a topic gained partitions). */
  refresh(): void {
    if (this.producer) this.replace(this.producer);
  }

  async close(): Promise<void> {
    this.closed = true;
    const producer = this.producer ?? (await this.connecting?.catch(() => undefined));
    this.producer = undefined;
    const all = [...this.retired.takeAll(), ...(producer ? [producer] : [])];
    await Promise.all(all.map((p) => p.disconnect().catch(() => undefined)));
  }

  private async current(): Promise<Producer> {
    if (this.producer) return this.producer;
    this.connecting ??= (async () => {
      const producer = this.kafka.producer({
        createPartitioner: Partitioners.DefaultPartitioner,
        allowAutoTopicCreation: false,
        retry: { retries: 2, initialRetryTime: 50, maxRetryTime: 500 },
        ...this.config,
      });
      try {
        await producer.connect();
      } finally {
        this.connecting = undefined;
      }
      this.producer = producer;
      return producer;
    })();
    return this.connecting;
  }

  private replace(old: Producer): void {
    if (this.producer !== old) return;
    this.producer = undefined;
    this.retired.add(old);
  }
}
