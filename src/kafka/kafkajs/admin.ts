import type { Admin, Kafka } from 'kafkajs';
import { retry } from '../../core/retry.js';
import { isCoordinatorMoving, isLeaderMoving, isUnknownTopic } from '../errors.js';
import type { CommittedOffset, PartitionOffsets, TopicAdmin, TopicCreation, TopicMetadata } from '../ports.js';

/** How long an admin read waits out a leader or coordinator that is moving: an election takes seconds. */
export const ADMIN_READ_RETRY_MS = 30_000;

/** A replaced admin is disconnected this much later, so calls in flight on it finish. */
const RETIRED_LINGER_MS = 5000;

/**
 * The TopicAdmin port over a KafkaJS admin (made by IdmintKafka with the admin's own request
 * timeout), with what KafkaJS's admin needs worked around:
 * - an admin that has read a topic's offsets fails every later metadata refresh once that topic is
 *   deleted elsewhere (like the producer, see TopicProducer): such an admin is replaced and the call
 *   made once more (the old one lingers, so calls in flight on it finish). An admin that never read
 *   offsets is kept: an unknown topic is then a plain answer (a topic not created yet);
 * - it gives up at once on a partition leader that moved or is not yet elected, and on a group
 *   coordinator that moved or is loading: offset reads ask again for up to ADMIN_READ_RETRY_MS.
 */
export class KafkaJsTopicAdmin implements TopicAdmin {
  private admin: Admin;
  private connected: Promise<void> | undefined;
  /** Whether the current admin read a topic's offsets: only then can a deleted topic poison its metadata. */
  private readOffsets = false;

  constructor(private readonly kafka: Kafka) {
    this.admin = kafka.admin();
  }

  connect(): Promise<void> {
    // A failed connect is forgotten, so the next call tries again instead of failing forever.
    this.connected ??= this.admin.connect().catch((err: unknown) => {
      this.connected = undefined;
      throw err;
    });
    return this.connected;
  }

  async close(): Promise<void> {
    this.connected = undefined;
    await this.admin.disconnect();
  }

  brokerCount(): Promise<number> {
    return this.call(async (a) => (await a.describeCluster()).brokers.length);
  }

  listTopics(): Promise<string[]> {
    return this.call((a) => a.listTopics());
  }

  createTopics(topics: readonly TopicCreation[]): Promise<void> {
    return this.call(async (a) => {
      await a.createTopics({
        topics: topics.map((t) => ({
          topic: t.topic,
          numPartitions: t.numPartitions,
          replicationFactor: t.replicationFactor,
          configEntries: Object.entries(t.configs ?? {}).map(([name, value]) => ({ name, value })),
        })),
        waitForLeaders: false,
      });
    });
  }

  createPartitions(topic: string, count: number): Promise<void> {
    return this.call(async (a) => void (await a.createPartitions({ topicPartitions: [{ topic, count }] })));
  }

  deleteTopics(topics: readonly string[]): Promise<void> {
    return this.call((a) => a.deleteTopics({ topics: [...topics] }));
  }

  deleteGroups(groups: readonly string[]): Promise<void> {
    return this.call(async (a) => void (await a.deleteGroups([...groups])));
  }

  topicMetadata(topics: readonly string[]): Promise<TopicMetadata[]> {
    return this.call(async (a) => {
      const meta = await a.fetchTopicMetadata({ topics: [...topics] });
      return meta.topics.map((t) => ({
        name: t.name,
        partitions: t.partitions.map((p) => ({ partition: p.partitionId, leader: p.leader, replicas: p.replicas })),
      }));
    });
  }

  topicOffsets(topic: string): Promise<PartitionOffsets[]> {
    // Fresh metadata each time: the admin keeps none between requests.
    return retry(
      () =>
        this.call(async (a) => {
          this.readOffsets = true;
          return (await a.fetchTopicOffsets(topic)).map((p) => ({ partition: p.partition, high: p.high, low: p.low }));
        }),
      { what: `reading the offsets of ${topic}`, retriable: isLeaderMoving, timeoutMs: ADMIN_READ_RETRY_MS },
    );
  }

  committedOffsets(groupId: string, topic: string): Promise<CommittedOffset[]> {
    // A fresh broker creates its offsets topic on first use: its coordinator loads meanwhile.
    return retry(
      () =>
        this.call(async (a) => {
          this.readOffsets = true;
          const [committed] = await a.fetchOffsets({ groupId, topics: [topic] });
          return (committed?.partitions ?? []).map((p) => ({ partition: p.partition, offset: p.offset, metadata: p.metadata }));
        }),
      { what: `reading the offsets group ${groupId} committed on ${topic}`, retriable: isCoordinatorMoving, timeoutMs: ADMIN_READ_RETRY_MS },
    );
  }

  /** Runs `fn` on the admin; after an unknown-topic error, once more on a fresh admin. */
  private async call<T>(fn: (admin: Admin) => Promise<T>): Promise<T> {
    await this.connect();
    const used = this.admin;
    try {
      return await fn(used);
    } catch (err) {
      if (!isUnknownTopic(err) || (this.admin === used && !this.readOffsets)) throw err;
      if (this.admin === used) {
        this.admin = this.kafka.admin();
        this.connected = undefined;
        this.readOffsets = false;
        setTimeout(() => void used.disconnect().catch(() => undefined), RETIRED_LINGER_MS).unref();
      }
      await this.connect();
      return fn(this.admin);
    }
  }
}
