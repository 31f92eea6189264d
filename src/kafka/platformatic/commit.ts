import { ConnectionPool, offsetCommitV8, type Consumer } from '@platformatic/kafka';
import type { PlatformaticBaseOptions } from './options.js';

/** The group membership a batch was fetched under: a commit made for it is fenced by the coordinator if the group moved on. */
export interface Membership {
  generationId: number;
  memberId: string;
}

export interface OffsetToCommit {
  topic: string;
  partition: number;
  /** The next offset to read. */
  offset: bigint;
  leaderEpoch: number;
  metadata: string | null;
}

/**
 * Commits offsets with their metadata, under a given generation and member id.
 *
 * @platformatic/kafka's `Consumer.commit` sends no metadata (always null) and, when the commit
 * meets a rebalance, rejoins and commits the same offsets again under the new generation — even
 * for a partition the rebalance gave to another member. idmint's pool reader needs both the other
 * way: the floor of issue 40 travels in the committed offset's metadata, and a commit made for
 * records fetched under an older generation must fail (ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS),
 * so none of them is handed out. So the OffsetCommit request (v8: Kafka 2.8 to 4.x) is sent here,
 * to the group's coordinator, with the generation and member id of the fetch.
 */
export class OffsetCommitter {
  private readonly pool: ConnectionPool;

  constructor(
    private readonly consumer: Consumer,
    options: PlatformaticBaseOptions,
  ) {
    const { clientId, bootstrapBrokers: _b, retries: _r, retryDelay: _d, metadataMaxAge: _m, autocreateTopics: _a, ...connection } = options;
    this.pool = new ConnectionPool(clientId, connection);
  }

  async commit(membership: Membership, offsets: readonly OffsetToCommit[]): Promise<void> {
    const coordinatorId = await this.consumer.findGroupCoordinator();
    const meta = await this.consumer.metadata({ topics: [...new Set(offsets.map((o) => o.topic))] });
    const broker = meta.brokers.get(coordinatorId);
    if (!broker) throw new Error(`the group coordinator (broker ${coordinatorId}) is not in the cluster's metadata`);
    const connection = await this.pool.get({ host: broker.host, port: broker.port });
    const topics = new Map<
      string,
      { name: string; partitions: { partitionIndex: number; committedOffset: bigint; committedLeaderEpoch: number; committedMetadata: string | null }[] }
    >();
    for (const o of offsets) {
      let t = topics.get(o.topic);
      if (!t) topics.set(o.topic, (t = { name: o.topic, partitions: [] }));
      t.partitions.push({ partitionIndex: o.partition, committedOffset: o.offset, committedLeaderEpoch: o.leaderEpoch, committedMetadata: o.metadata });
    }
    // The response's per-partition error codes reject the promise (a ResponseError naming them).
    await offsetCommitV8.api.async(connection, this.consumer.groupId, membership.generationId, membership.memberId, null, [...topics.values()]);
  }

  async close(): Promise<void> {
    await this.pool.close();
  }
}
