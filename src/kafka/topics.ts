import { IdmintError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { retry } from '../core/retry.js';
import { isLeaderNotAvailable, isUnknownTopic } from './errors.js';
import { DEFAULT_POOL_PARTITIONS, INIT_COMMAND, kafkaNames, POOL_TOPIC_CONFIGS, REQUEST_TOPIC } from './names.js';
import type { TopicAdmin, TopicCreation, TopicMetadata } from './ports.js';

/**
 * The admin code that creates idmint's topics and checks them (the broker never auto-creates:
 * auto.create.topics.enable=false). Their names are in names.ts.
 */
export interface TopicSpec {
  topic: string;
  numPartitions: number;
  /** Topic-level configs, e.g. `{ 'retention.ms': '60000' }`. */
  configs?: Record<string, string>;
}

/** `topic "a"` or `topics "a", "b"`, for messages. */
function namedTopics(topics: readonly string[]): string {
  return `topic${topics.length > 1 ? 's' : ''} ${topics.map((t) => `"${t}"`).join(', ')}`;
}

/** The replication factor idmint gives its topics: the configured one, else min(3, brokers in the cluster). */
export function replicationFor(brokers: number, configured?: number): number {
  return configured ?? Math.max(1, Math.min(3, brokers));
}

/** min.insync.replicas for a factor: one fewer (a write survives the loss of any one broker), at least 1. */
export function minInsyncFor(factor: number): number {
  return Math.max(1, factor - 1);
}

/**
 * Creates whichever of `specs` are missing; returns the names it created. Safe to race. Each gets
 * `replicationFactor` (default min(3, brokers)) and min.insync.replicas one fewer, so with every
 * producer on acks=-1 an acknowledged message is on two brokers and survives losing either.
 */
export async function ensureTopics(admin: TopicAdmin, specs: readonly TopicSpec[], replicationFactor?: number): Promise<string[]> {
  const existing = await existingTopics(
    admin,
    specs.map((s) => s.topic),
  );
  const missing = specs.filter((s) => !existing.has(s.topic));
  if (missing.length === 0) return [];
  const brokers = await admin.brokerCount();
  const factor = replicationFor(brokers, replicationFactor);
  if (factor > brokers) {
    throw new IdmintError(
      'NOT_READY',
      `cannot create Kafka ${namedTopics(missing.map((s) => s.topic))} with replication factor ${factor}: the cluster has ${brokers} broker${brokers === 1 ? '' : 's'} (IDMINT_KAFKA_REPLICATION_FACTOR)`,
      { details: { brokers, replicationFactor: factor } },
    );
  }
  const topics: TopicCreation[] = missing.map((s) => ({
    topic: s.topic,
    numPartitions: s.numPartitions,
    replicationFactor: factor,
    configs: { 'min.insync.replicas': String(minInsyncFor(factor)), ...s.configs },
  }));
  let failure: unknown;
  try {
    await admin.createTopics(topics);
  } catch (err) {
    // Another process may have created some of them meanwhile: a failure only if they do not appear.
    failure = err;
  }
  try {
    await untilServed(
      admin,
      missing.map((s) => s.topic),
      failure === undefined ? SERVED_TIMEOUT_MS : RACE_TIMEOUT_MS,
      new Map(missing.map((s) => [s.topic, s.numPartitions])),
    );
  } catch (err) {
    throw failure ?? err;
  }
  return missing.map((s) => s.topic);
}

/** How long a topic just created may take to be served (every partition led) by the broker asked. */
const SERVED_TIMEOUT_MS = 20_000;
/** How long to look for topics whose creation failed (made by another process at the same time). */
const RACE_TIMEOUT_MS = 5000;
/** How long a topic not listed is looked for before it is reported missing. */
const MISSING_RECHECK_MS = 2000;

/**
 * Until the broker asked serves every partition of `topics` with a leader. On several brokers a
 * topic just created reaches each broker's metadata a moment apart (seconds, on a loaded machine):
 * a broker that has not seen it yet answers UNKNOWN_TOPIC_OR_PARTITION ("does not host this
 * topic-partition"), which KafkaJS's own wait for leaders does not retry.
 */
async function untilServed(admin: TopicAdmin, topics: readonly string[], timeoutMs: number, partitions?: ReadonlyMap<string, number>): Promise<void> {
  const waiting = new WeakSet<Error>();
  const notServed = (cause?: unknown): IdmintError => {
    const err = new IdmintError(
      'NOT_READY',
      `Kafka ${namedTopics(topics)} not served by the brokers within ${timeoutMs} ms of being created`,
      cause === undefined ? {} : { cause },
    );
    waiting.add(err);
    return err;
  };
  await retry(
    async () => {
      let meta: TopicMetadata[];
      try {
        // Every partition: metadata that shows some of a new topic's partitions would stay cached by
        // the admin (KafkaJS keeps it for minutes), and offsets read through it would miss the rest.
        meta = await admin.topicMetadata(topics);
      } catch (err) {
        throw isUnknownTopic(err) || isLeaderNotAvailable(err) ? notServed(err) : err;
      }
      const whole = (t: { name: string; partitions: { leader: number }[] }): boolean =>
        t.partitions.length >= (partitions?.get(t.name) ?? 1) && t.partitions.every((p) => p.leader >= 0);
      if (meta.length !== topics.length || !meta.every(whole)) throw notServed();
    },
    {
      what: `waiting for ${namedTopics(topics)} to be served`,
      retriable: (err) => err instanceof Error && waiting.has(err),
      timeoutMs,
      initialMs: 100,
      maxMs: 1000,
    },
  );
}

/**
 * Which of `topics` exist. KafkaJS lists topics with one metadata request for the whole cluster
 * and fails it if any partition of any topic has no leader — another team's topic with one
 * replica on a dead broker would stop idmint. Then it asks for `topics` alone.
 */
export async function existingTopics(admin: TopicAdmin, topics: readonly string[]): Promise<Set<string>> {
  try {
    return new Set(await admin.listTopics());
  } catch (err) {
    if (!isLeaderNotAvailable(err)) throw err;
    const found = new Set<string>();
    for (const topic of topics) {
      try {
        await admin.topicMetadata([topic]);
        found.add(topic);
      } catch (e) {
        if (!isUnknownTopic(e)) throw e;
      }
    }
    return found;
  }
}

/** A topic with fewer replicas than idmint would give it now. */
export interface UnderReplicated {
  topic: string;
  replicas: number;
  wanted: number;
}

/**
 * The topics among `topics` whose partitions have fewer replicas than the configured factor (or
 * min(3, brokers)): created before the cluster grew, or by hand. Kafka never raises a factor by
 * itself; `kafka-reassign-partitions` does.
 */
export async function underReplicated(admin: TopicAdmin, topics: readonly string[], replicationFactor?: number): Promise<UnderReplicated[]> {
  if (topics.length === 0) return [];
  const wanted = replicationFor(await admin.brokerCount(), replicationFactor);
  const meta = await admin.topicMetadata(topics);
  const found: UnderReplicated[] = [];
  for (const t of meta) {
    const replicas = Math.min(...t.partitions.map((p) => p.replicas.length));
    if (t.partitions.length > 0 && replicas < wanted) found.push({ topic: t.name, replicas, wanted });
  }
  return found;
}

/** One warn line for under-replicated topics, with what to do about it. */
export function logUnderReplicated(logger: Logger, found: readonly UnderReplicated[]): void {
  if (found.length === 0) return;
  logger.warn(
    { topics: found },
    `Kafka topic${found.length > 1 ? 's' : ''} ${found.map((f) => `"${f.topic}" (${f.replicas} of ${f.wanted} replicas)`).join(', ')} replicated less than configured: losing a broker may lose IDs' requests or blocks; raise the factor with kafka-reassign-partitions`,
  );
}

/** Start-up check: names the missing topics and the command that creates them. */
export async function assertTopicsExist(admin: TopicAdmin, topics: readonly string[]): Promise<void> {
  const existing = await existingTopics(admin, topics);
  const missing = topics.filter((t) => !existing.has(t));
  // The broker asked may not know yet of a topic created a moment ago on another: ask again briefly.
  const stillMissing =
    missing.length > 0 &&
    (await untilServed(admin, missing, MISSING_RECHECK_MS).then(
      () => false,
      () => true,
    ));
  if (stillMissing) {
    throw new IdmintError(
      'NOT_READY',
      `Kafka ${namedTopics(missing)} missing: run \`${INIT_COMMAND}\` (pool topics: \`${INIT_COMMAND} --pool-tags <tag,...>\`)`,
      { details: { missing } },
    );
  }
}

export interface InitTopicsOptions {
  /** Partitions of `idmint.requests` (config IDMINT_KAFKA_PARTITIONS). */
  requestPartitions: number;
  /** The request topic (config IDMINT_KAFKA_REQUEST_TOPIC). Default `idmint.requests`. */
  requestTopic?: string;
  /** retention.ms of the request topic (config IDMINT_KAFKA_REQUEST_RETENTION_MS). Default the broker's. */
  requestRetentionMs?: number;
  /** Tags whose pool topics to create. */
  poolTags?: readonly string[];
  /** Namespace of the pool topics (config IDMINT_KAFKA_NAMESPACE). Default none: `idmint.ids.<tag>`. */
  namespace?: string | undefined;
  /** Partitions per pool topic (config IDMINT_KAFKA_POOL_PARTITIONS). */
  poolPartitions?: number;
  /** Replication factor (config IDMINT_KAFKA_REPLICATION_FACTOR). Default min(3, brokers). */
  replicationFactor?: number | undefined;
}

/** What `idmint kafka init` does: the request topic plus any pool topics named. */
export async function initTopics(admin: TopicAdmin, options: InitTopicsOptions): Promise<string[]> {
  const specs: TopicSpec[] = [
    {
      topic: options.requestTopic ?? REQUEST_TOPIC,
      numPartitions: options.requestPartitions,
      ...(options.requestRetentionMs === undefined ? {} : { configs: { 'retention.ms': String(options.requestRetentionMs) } }),
    },
  ];
  const names = kafkaNames(options.namespace);
  for (const tag of options.poolTags ?? [])
    specs.push({ topic: names.poolTopic(tag), numPartitions: options.poolPartitions ?? DEFAULT_POOL_PARTITIONS, configs: { ...POOL_TOPIC_CONFIGS } });
  return ensureTopics(admin, specs, options.replicationFactor);
}
