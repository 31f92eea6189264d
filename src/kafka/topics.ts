import type { Admin, ITopicConfig } from 'kafkajs';
import { BIZ_TAG_PATTERN } from '../core/ports.js';
import { BadRequestError, IdmintError } from '../core/errors.js';

/**
 * Topic and group names, and the admin code that creates them. The broker never auto-creates
 * (auto.create.topics.enable=false): every topic idmint uses is made here.
 */

export const REQUEST_TOPIC = 'idmint.requests';
export const RESPONDER_GROUP = 'idmint.responders';
export const POOL_TOPIC_PREFIX = 'idmint.ids.';
export const POOL_GROUP_PREFIX = 'idmint.pool.';
export const INIT_COMMAND = 'idmint kafka init';

function checkTag(bizTag: string): void {
  if (!BIZ_TAG_PATTERN.test(bizTag)) throw new BadRequestError(`invalid biz tag "${bizTag}"`, 'bizTag');
}

/**
 * Pool-topic configs: blocks older than a day are deleted, well before Kafka forgets an idle
 * group's offsets (7 days), so a group that returns can never replay blocks it already handed out.
 */
/** Partitions of a pool topic: the most SDK instances that read one tag's pool at once (IDMINT_KAFKA_POOL_PARTITIONS). */
export const DEFAULT_POOL_PARTITIONS = 16;

export const POOL_TOPIC_CONFIGS: Readonly<Record<string, string>> = Object.freeze({ 'retention.ms': String(86_400_000), 'segment.ms': String(3_600_000) });

/**
 * `idmint.ids.<tag>` for shard 0, `idmint.ids.<tag>.S<n>` for others: tags are lower-case,
 * so the upper-case `S` can never collide with another tag's topic.
 */
export function poolTopic(bizTag: string, shard = 0): string {
  checkTag(bizTag);
  return shard === 0 ? `${POOL_TOPIC_PREFIX}${bizTag}` : `${POOL_TOPIC_PREFIX}${bizTag}.S${shard}`;
}

/** Exactly one consumer group per tag (the pool-topic contract); shards other than 0 get their own. */
export function poolGroup(bizTag: string, shard = 0): string {
  checkTag(bizTag);
  return shard === 0 ? `${POOL_GROUP_PREFIX}${bizTag}` : `${POOL_GROUP_PREFIX}${bizTag}.S${shard}`;
}

export interface TopicSpec {
  topic: string;
  numPartitions: number;
  /** Topic-level configs, e.g. `{ 'retention.ms': '60000' }`. */
  configs?: Record<string, string>;
}

/** Creates whichever of `specs` are missing; returns the names it created. Safe to race. */
export async function ensureTopics(admin: Admin, specs: readonly TopicSpec[]): Promise<string[]> {
  const existing = new Set(await admin.listTopics());
  const missing = specs.filter((s) => !existing.has(s.topic));
  if (missing.length === 0) return [];
  const topics: ITopicConfig[] = missing.map((s) => ({
    topic: s.topic,
    numPartitions: s.numPartitions,
    replicationFactor: -1,
    configEntries: Object.entries(s.configs ?? {}).map(([name, value]) => ({ name, value })),
  }));
  try {
    await admin.createTopics({ topics, waitForLeaders: true });
  } catch (err) {
    // Another process may have created some of them meanwhile; only a topic still missing is a failure.
    const now = new Set(await admin.listTopics());
    if (missing.some((s) => !now.has(s.topic))) throw err;
  }
  return missing.map((s) => s.topic);
}

/** Start-up check: names the missing topics and the command that creates them. */
export async function assertTopicsExist(admin: Admin, topics: readonly string[]): Promise<void> {
  const existing = new Set(await admin.listTopics());
  const missing = topics.filter((t) => !existing.has(t));
  if (missing.length > 0) {
    throw new IdmintError(
      'NOT_READY',
      `Kafka topic${missing.length > 1 ? 's' : ''} ${missing.map((t) => `"${t}"`).join(', ')} missing: run \`${INIT_COMMAND}\` (pool topics: \`${INIT_COMMAND} --pool-tags <tag,...>\`)`,
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
  /** Partitions per pool topic; default 2, so two SDK consumers of one tag both get blocks. */
  poolPartitions?: number;
}

/** What `idmint kafka init` does: the request topic plus any pool topics named. */
export async function initTopics(admin: Admin, options: InitTopicsOptions): Promise<string[]> {
  const specs: TopicSpec[] = [
    {
      topic: options.requestTopic ?? REQUEST_TOPIC,
      numPartitions: options.requestPartitions,
      ...(options.requestRetentionMs === undefined ? {} : { configs: { 'retention.ms': String(options.requestRetentionMs) } }),
    },
  ];
  for (const tag of options.poolTags ?? []) specs.push({ topic: poolTopic(tag), numPartitions: options.poolPartitions ?? DEFAULT_POOL_PARTITIONS, configs: { ...POOL_TOPIC_CONFIGS } });
  return ensureTopics(admin, specs);
}
