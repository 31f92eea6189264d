import { compatibilityPartitioner, ProduceAcks, Producer, type MessageToProduce } from '@platformatic/kafka';
import type { Logger } from '../../core/logger.js';
import { retry } from '../../core/retry.js';
import { isUnknownTopic } from '../errors.js';
import type { OutgoingRecord, RecordHeaders, TopicWriter } from '../ports.js';
import { PerTopicSends, RetiredProducers } from '../writer-parts.js';
import { isProducerIdRefusal, type PlatformaticBaseOptions, typed } from './options.js';

/** How long an append-once send asks again for a producer id the brokers refuse (a fresh cluster). */
const PRODUCER_ID_RETRY_MS = 30_000;

/** Record headers as the library sends them: one Buffer per name (a repeated header keeps its last value). */
export function headersOf(headers: RecordHeaders | undefined): Record<string, Buffer> | undefined {
  if (!headers) return undefined;
  const out: Record<string, Buffer> = {};
  for (const [name, value] of Object.entries(headers)) {
    const last = Array.isArray(value) ? value[value.length - 1] : value;
    if (last !== undefined) out[name] = Buffer.isBuffer(last) ? last : Buffer.from(last);
  }
  return out;
}

/**
 * By key as Java's client and KafkaJS's default partitioner (murmur2, sign bit dropped), so both
 * drivers put a key on the same partition; keyless records spread round-robin per topic.
 */
export function partitionerFor(): (message: MessageToProduce, key: Buffer | undefined) => number {
  const next = new Map<string, number>();
  return (message, key) => {
    if (key) return compatibilityPartitioner(message, key);
    const n = next.get(message.topic) ?? 0;
    next.set(message.topic, (n + 1) & 0x3fffffff);
    return n;
  };
}

/**
 * The TopicWriter port over @platformatic/kafka's Producer: acks=-1 on every send. With appendOnce
 * the producer is idempotent (its own retries resend the same sequence numbers, which the broker
 * drops if the first attempt landed), sends to one topic go one at a time, and a send that failed
 * in the end replaces the producer (a new producer id) and is not resent: the library keeps the
 * failed batch's sequence numbers used, so if its request did not land, the next send on that
 * producer id would be refused (OUT_OF_ORDER_SEQUENCE_NUMBER); if it did, the caller's new segment
 * must not repeat it anyway. Without appendOnce, a send that met a deleted topic's stale metadata
 * is sent once more with fresh metadata (a repeated reply is dropped by its id).
 */
export class PlatformaticTopicWriter implements TopicWriter {
  private producer: Producer | undefined;
  private closed = false;
  private readonly sends = new PerTopicSends();
  /** Replaced producers linger so sends already in flight on them can finish. */
  private readonly retired: RetiredProducers<Producer>;

  constructor(
    private readonly options: PlatformaticBaseOptions,
    private readonly logger: Logger,
    private readonly appendOnce = false,
  ) {
    this.retired = new RetiredProducers((p) => p.close(), logger);
  }

  async connect(): Promise<void> {
    try {
      await this.current().metadata({ topics: [] });
    } catch (err) {
      throw typed(err);
    }
  }

  send(topic: string, records: readonly OutgoingRecord[]): Promise<void> {
    if (!this.appendOnce) return this.sendOrResend(topic, records);
    return this.sends.run(topic, () => this.sendOnce(topic, records));
  }

  refresh(): void {
    this.producer?.clearMetadata();
  }

  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.retired.takeAll(), ...(this.producer ? [this.producer] : [])];
    this.producer = undefined;
    await Promise.all(all.map((p) => p.close().catch(() => undefined)));
  }

  private async sendOrResend(topic: string, records: readonly OutgoingRecord[]): Promise<void> {
    const producer = this.current();
    try {
      await producer.send({ messages: messagesOf(topic, records) });
    } catch (err) {
      typed(err);
      if (!isUnknownTopic(err) || this.closed) throw err;
      producer.clearMetadata();
      try {
        await producer.send({ messages: messagesOf(topic, records) });
      } catch (again) {
        throw typed(again);
      }
    }
  }

  private sendOnce(topic: string, records: readonly OutgoingRecord[]): Promise<void> {
    // A producer id refused (KafkaJS retries this inside its producer; this library does not):
    // nothing was sent, so the send is made again on a fresh producer.
    return retry(() => this.sendOnceNow(topic, records), {
      what: 'getting the idempotent producer an id',
      retriable: (err) => !this.closed && isProducerIdRefusal(err),
      timeoutMs: PRODUCER_ID_RETRY_MS,
      initialMs: 200,
      maxMs: 2000,
    });
  }

  private async sendOnceNow(topic: string, records: readonly OutgoingRecord[]): Promise<void> {
    const producer = this.current();
    try {
      await producer.send({ messages: messagesOf(topic, records) });
    } catch (err) {
      this.logger.debug({ topic, err }, 'a send failed: the next one uses a fresh producer (new producer id, fresh sequence numbers)');
      this.replace(producer);
      throw typed(err);
    }
  }

  private current(): Producer {
    this.producer ??= new Producer({
      ...this.options,
      acks: ProduceAcks.ALL,
      idempotent: this.appendOnce,
      partitioner: partitionerFor(),
      // Like the KafkaJS writer: a send retried by the library a couple of times, not more.
      retries: Math.min(this.options.retries, 2),
    });
    return this.producer;
  }

  private replace(old: Producer): void {
    if (this.producer !== old) return;
    this.producer = undefined;
    this.retired.add(old);
  }
}

function messagesOf(topic: string, records: readonly OutgoingRecord[]): MessageToProduce[] {
  return records.map((r) => {
    const headers = headersOf(r.headers);
    return {
      topic,
      value: Buffer.isBuffer(r.value) ? r.value : Buffer.from(r.value),
      ...(r.key === undefined || r.key === null ? {} : { key: Buffer.from(r.key) }),
      ...(headers ? { headers } : {}),
      ...(r.partition === undefined ? {} : { partition: r.partition }),
    };
  });
}
