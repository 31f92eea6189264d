import { Admin } from '@platformatic/kafka';
import { retry } from '../../core/retry.js';
import { isCoordinatorMoving, isLeaderMoving } from '../errors.js';
import type { CommittedOffset, PartitionOffsets, TopicAdmin, TopicCreation, TopicMetadata } from '../ports.js';
import { ADMIN_REQUEST_TIMEOUT_MS, type PlatformaticBaseOptions, typed } from './options.js';

/** How long an offset read waits out a leader or coordinator that is moving: an election takes seconds. */
export const ADMIN_READ_RETRY_MS = 30_000;

/** Offsets at the log's end and start (ListOffsets timestamps). */
const LATEST = -1n;
const EARLIEST = -2n;

/**
 * The TopicAdmin port over @platformatic/kafka's Admin. Unlike KafkaJS's, its metadata holds only
 * what each call asks for and a deleted topic poisons nothing, so the admin is never replaced; an
 * offset read still asks again while a leader or the group's coordinator moves.
 */
export class PlatformaticTopicAdmin implements TopicAdmin {
  private admin: Admin | undefined;

  constructor(private readonly options: PlatformaticBaseOptions) {}

  async connect(): Promise<void> {
    // The library connects on first request; a metadata read checks the brokers answer.
    await this.call((a) => a.metadata({ topics: [] }));
  }

  async close(): Promise<void> {
    const admin = this.admin;
    this.admin = undefined;
    await admin?.close();
  }

  brokerCount(): Promise<number> {
    return this.call(async (a) => (await a.metadata({ topics: [], forceUpdate: true })).brokers.size);
  }

  listTopics(): Promise<string[]> {
    return this.call((a) => a.listTopics());
  }

  async createTopics(topics: readonly TopicCreation[]): Promise<void> {
    // One request per topic: the library applies one set of configs to every topic of a request.
    for (const t of topics) {
      await this.call((a) =>
        a.createTopics({
          topics: [t.topic],
          partitions: t.numPartitions,
          replicas: t.replicationFactor,
          configs: Object.entries(t.configs ?? {}).map(([name, value]) => ({ name, value })),
        }),
      );
    }
  }

  createPartitions(topic: string, count: number): Promise<void> {
    return this.call((a) => a.createPartitions({ topics: [{ name: topic, count }] }));
  }

  deleteTopics(topics: readonly string[]): Promise<void> {
    return this.call((a) => a.deleteTopics({ topics: [...topics] }));
  }

  deleteGroups(groups: readonly string[]): Promise<void> {
    return this.call((a) => a.deleteGroups({ groups: [...groups] }));
  }

  topicMetadata(topics: readonly string[]): Promise<TopicMetadata[]> {
    return this.call(async (a) => {
      const meta = await a.metadata({ topics: [...topics], forceUpdate: true });
      return topics.flatMap((name) => {
        const t = meta.topics.get(name);
        return t ? [{ name, partitions: t.partitions.map((p, partition) => ({ partition, leader: p.leader, replicas: p.replicas })) }] : [];
      });
    });
  }

  topicOffsets(topic: string): Promise<PartitionOffsets[]> {
    return retry(
      () =>
        this.call(async (a) => {
          const meta = await a.metadata({ topics: [topic], forceUpdate: true });
          const count = meta.topics.get(topic)?.partitionsCount ?? 0;
          const at = (timestamp: bigint) =>
            a.listOffsets({ topics: [{ name: topic, partitions: Array.from({ length: count }, (_, partitionIndex) => ({ partitionIndex, timestamp })) }] });
          const [high, low] = await Promise.all([at(LATEST), at(EARLIEST)]);
          const lows = new Map((low[0]?.partitions ?? []).map((p) => [p.partitionIndex, p.offset]));
          return (high[0]?.partitions ?? [])
            .map((p) => ({ partition: p.partitionIndex, high: p.offset.toString(), low: (lows.get(p.partitionIndex) ?? 0n).toString() }))
            .sort((x, y) => x.partition - y.partition);
        }),
      { what: "reading the topic's offsets", retriable: isLeaderMoving, timeoutMs: ADMIN_READ_RETRY_MS },
    );
  }

  committedOffsets(groupId: string, topic: string): Promise<CommittedOffset[]> {
    // A fresh broker creates its offsets topic on first use: its coordinator loads meanwhile.
    return retry(
      () =>
        this.call(async (a) => {
          const meta = await a.metadata({ topics: [topic] });
          const count = meta.topics.get(topic)?.partitionsCount ?? 0;
          const [group] = await a.listConsumerGroupOffsets({
            groups: [{ groupId, topics: [{ name: topic, partitionIndexes: Array.from({ length: count }, (_, i) => i) }] }],
          });
          const parts = group?.topics.find((t) => t.name === topic)?.partitions ?? [];
          return parts
            .map((p) => ({ partition: p.partitionIndex, offset: p.committedOffset.toString(), metadata: p.metadata ?? null }))
            .sort((x, y) => x.partition - y.partition);
        }),
      { what: "reading the group's committed offsets", retriable: isCoordinatorMoving, timeoutMs: ADMIN_READ_RETRY_MS },
    );
  }

  private async call<T>(fn: (admin: Admin) => Promise<T>): Promise<T> {
    this.admin ??= new Admin({ ...this.options, requestTimeout: Math.max(this.options.requestTimeout, ADMIN_REQUEST_TIMEOUT_MS) });
    try {
      return await fn(this.admin);
    } catch (err) {
      throw typed(err);
    }
  }
}
