/**
 * idmint's own Kafka ports. The domain (responder, pool sink, SDK pool reader and rpc client,
 * topic admin) talks to these; a driver folder (src/kafka/kafkajs/) implements them, and every
 * quirk of its client library stays inside it. A second driver is a second folder beside it.
 * Nothing here imports a Kafka client.
 */
import type { Logger } from '../core/logger.js';

/** The drivers idmint knows (IDMINT_KAFKA_DRIVER, the SDK's `driver`): KafkaJS 2.2.4 (default) and @platformatic/kafka 2.x. */
export const KAFKA_DRIVERS = ['kafkajs', 'platformatic'] as const;
export type KafkaDriverName = (typeof KAFKA_DRIVERS)[number];
export const DEFAULT_KAFKA_DRIVER: KafkaDriverName = 'kafkajs';

/** TLS to the brokers: `true` for the system's CAs, or these PEM strings. */
export interface KafkaTlsOptions {
  ca?: string | string[];
  cert?: string;
  key?: string;
  /** Default true. */
  rejectUnauthorized?: boolean;
  servername?: string;
}

export interface KafkaSaslOptions {
  mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512';
  username: string;
  password: string;
}

/** Where the brokers are and how to reach them: the SDK's and the server's one shape, whatever the driver. */
export interface KafkaConnectionOptions {
  /** `host:port,host:port` or an array, as KAFKA_BROKERS gives it. */
  brokers: string[] | string;
  /** Default `idmint`. */
  clientId?: string;
  tls?: boolean | KafkaTlsOptions;
  sasl?: KafkaSaslOptions;
  /** The driver's log lines go here, at debug unless they report a real failure. Default silent. */
  logger?: Logger;
  /** Default `kafkajs`. */
  driver?: KafkaDriverName;
  /** Per-request timeout, ms (a hung broker is left after it). Default 5000 with either driver. */
  requestTimeoutMs?: number;
  /** Connection (and SASL) timeout, ms. Default the driver's. */
  connectionTimeoutMs?: number;
  /** Retries of a failed request inside the driver; 0 fails at once (preflight, CLI). Default the driver's. */
  retries?: number;
}

/** A record to append. */
/** Record headers (W3C trace context travels here: src/tracing/propagation.ts). */
export type RecordHeaders = Record<string, Buffer | string | (Buffer | string)[] | undefined>;

export interface OutgoingRecord {
  key?: string | null;
  value: string | Buffer;
  headers?: RecordHeaders;
  /** Default: by key (murmur2, as Java's client), or spread when there is none. */
  partition?: number;
}

/** A record as read. */
export interface ReceivedRecord {
  /** Decimal string: offsets exceed 2^53 in principle. */
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  headers?: RecordHeaders;
}

export interface TopicCreation {
  topic: string;
  numPartitions: number;
  replicationFactor: number;
  configs?: Readonly<Record<string, string>>;
}

export interface PartitionMetadata {
  partition: number;
  /** -1 while the partition has no leader. */
  leader: number;
  replicas: number[];
}

export interface TopicMetadata {
  name: string;
  partitions: PartitionMetadata[];
}

export interface PartitionOffsets {
  partition: number;
  /** The next offset to be written (decimal string). */
  high: string;
  low: string;
}

export interface CommittedOffset {
  partition: number;
  /** -1 when the group committed nothing there. */
  offset: string;
  metadata: string | null;
}

/**
 * Topic and group administration. A driver's errors carry the Kafka protocol's error name as `type`
 * (UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE...), on themselves or a `cause`:
 * src/kafka/errors.ts recognises the ones idmint acts on.
 */
export interface TopicAdmin {
  /** Idempotent; every other call connects first. */
  connect(): Promise<void>;
  close(): Promise<void>;
  brokerCount(): Promise<number>;
  listTopics(): Promise<string[]>;
  /** Returns without waiting for leaders: ensureTopics waits for them itself. */
  createTopics(topics: readonly TopicCreation[]): Promise<void>;
  createPartitions(topic: string, count: number): Promise<void>;
  deleteTopics(topics: readonly string[]): Promise<void>;
  deleteGroups(groups: readonly string[]): Promise<void>;
  topicMetadata(topics: readonly string[]): Promise<TopicMetadata[]>;
  topicOffsets(topic: string): Promise<PartitionOffsets[]>;
  committedOffsets(groupId: string, topic: string): Promise<CommittedOffset[]>;
}

export interface TopicWriterOptions {
  /**
   * True where a record must never be appended twice (pool blocks): an idempotent producer, sends
   * to one topic one at a time, and a send that failed is not resent (its caller publishes anew).
   * False (requests, replies): a send that met a deleted topic's stale metadata is resent once.
   */
  appendOnce?: boolean;
}

/** Appends records, acknowledged by every in-sync replica (acks=-1). */
export interface TopicWriter {
  connect(): Promise<void>;
  send(topic: string, records: readonly OutgoingRecord[]): Promise<void>;
  /** The next send uses fresh metadata (a topic gained partitions). */
  refresh(): void;
  close(): Promise<void>;
}

/** How a group reader commits. */
export type ReaderCommit =
  /** Each batch commits itself through `ReaderBatch.commit` (pool topics: commit before hand-out). */
  | { kind: 'manual' }
  /** Offsets marked done are committed at most this often (the request topic). */
  | { kind: 'interval'; intervalMs: number }
  /** Nothing is committed (a reply topic one client owns). */
  | { kind: 'none' };

export interface GroupReaderOptions {
  groupId: string;
  topic: string;
  commit: ReaderCommit;
  sessionTimeoutMs: number;
  heartbeatIntervalMs: number;
  /** How long the coordinator waits for members to rejoin. Default sessionTimeoutMs. */
  rebalanceTimeoutMs?: number;
  /** Longest wait of a fetch for records. Default the driver's. */
  maxWaitMs?: number;
  /** Partitions handled at once. Default 1. */
  partitionsConcurrently?: number;
  /** start() fails with TIMEOUT when the group is not joined by then. */
  joinTimeoutMs: number;
  /**
   * A started reader that neither completes a fetch nor hears from its handler (a heartbeat) for
   * this long is taken as wedged: it fails (`failed`, onFailed) and its owner replaces it. Default off.
   */
  stallTimeoutMs?: number;
}

/** One partition's records as fetched. */
export interface ReaderBatch {
  readonly topic: string;
  readonly partition: number;
  readonly records: readonly ReceivedRecord[];
  /** False once this batch must end: the reader stopped, or its group rebalances. */
  active(): boolean;
  /** Tells the group this member is alive (a handler waiting for room calls it). Throws when it must rejoin. */
  heartbeat(): Promise<void>;
  /** The record at `offset` is handled (interval commits). */
  markDone(offset: string): void;
  /**
   * Manual commits: commits `nextOffset` with `metadata` and resolves true only when the commit
   * is known to have been made; false (or a throw) means nothing read may be handed out.
   */
  commit(nextOffset: string, metadata: string): Promise<boolean>;
}

export interface GroupReaderEvents {
  /** The group was joined; this member holds this many partitions of the topic. */
  joined?(partitions: number): void;
  /** A rebalance starts (every batch in hand has ended). */
  rebalancing?(): void;
  /** The reader will not serve again (a crash the driver does not restart from, or a stall). */
  failed?(err: unknown): void;
}

/** A consumer group member reading one topic. Single use: after a failed start, make a new one. */
export interface GroupReader {
  /** Joins and starts delivering batches; resolves once the group is joined. */
  start(onBatch: (batch: ReaderBatch) => Promise<void>, events?: GroupReaderEvents): Promise<void>;
  /** True once it will not serve again. */
  readonly failed: boolean;
  /**
   * Whether it serves now: joined to its group and fetching (a fetch completed within a few of
   * its waits). For /readyz: a responder whose Kafka is gone, or whose group is still rebalancing,
   * answers no request.
   */
  health(): { ok: boolean; message?: string };
  close(): Promise<void>;
}

/** One connection's factory of the above: what a driver folder exports. */
export interface KafkaDriver {
  readonly name: KafkaDriverName;
  admin(): TopicAdmin;
  writer(options?: TopicWriterOptions): TopicWriter;
  reader(options: GroupReaderOptions): GroupReader;
  /** An error raised by the driver's client library rather than idmint's (a broker unreachable, a request refused). */
  isClientError(err: unknown): boolean;
  /** The brokers refused the credentials (SASL). */
  isAuthFailure(err: unknown): boolean;
}
