import type { Kafka, Message, Producer, ProducerConfig } from 'kafkajs';
import { Partitioners } from 'kafkajs';
import type { Logger } from '../core/logger.js';

/**
 * A KafkaJS producer for many short-lived topics (reply topics, pool topics that get removed).
 * KafkaJS keeps every topic it ever sent to in its metadata set; once one is deleted, each
 * metadata refresh fails with UNKNOWN_TOPIC_OR_PARTITION and no new topic can be added. So on
 * that error the producer is replaced by a fresh one and the send retried once.
 */
export class TopicProducer {
  private producer: Producer | undefined;
  private connecting: Promise<Producer> | undefined;
  private closed = false;
  /** Replaced producers linger so sends already in flight on them can finish. */
  private readonly retired = new Set<Producer>();

  constructor(
    private readonly kafka: Kafka,
    private readonly logger: Logger,
    private readonly config: ProducerConfig = {},
  ) {}

  async connect(): Promise<void> {
    await this.current();
  }

  /** Sends to one topic; a deleted topic rejects with the KafkaJS error after one fresh retry. */
  async send(topic: string, messages: Message[]): Promise<void> {
    const producer = await this.current();
    try {
      await producer.send({ topic, messages });
    } catch (err) {
      if (!isUnknownTopic(err) || this.closed) throw err;
      this.logger.debug({ topic }, 'Kafka producer metadata poisoned by a deleted topic; replacing the producer');
      this.replace(producer);
      await (await this.current()).send({ topic, messages });
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const producer = this.producer ?? (await this.connecting?.catch(() => undefined));
    this.producer = undefined;
    const all = [...this.retired, ...(producer ? [producer] : [])];
    this.retired.clear();
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
    setTimeout(() => {
      if (!this.retired.delete(old)) return;
      old.disconnect().catch((err: unknown) => this.logger.debug({ err }, 'disconnecting a replaced producer failed'));
    }, 5000).unref();
  }
}

export function isUnknownTopic(err: unknown): boolean {
  const seen = new Set<unknown>();
  let e: unknown = err;
  while (e instanceof Error && !seen.has(e)) {
    seen.add(e);
    const type = (e as { type?: unknown }).type;
    if (type === 'UNKNOWN_TOPIC_OR_PARTITION' || /does not host this topic-partition|unknown topic/i.test(e.message)) return true;
    e = (e as { originalError?: unknown }).originalError ?? e.cause;
  }
  return false;
}
