import { BIZ_TAG_PATTERN } from '../core/ports.js';
import { BadRequestError } from '../core/errors.js';

/**
 * The names of idmint's Kafka topics and groups, per namespace: what the SDK needs to find them.
 * The admin code that creates them is in topics.ts (the broker never auto-creates).
 */

/** The command that creates every topic idmint needs (named in refusals). */
export const INIT_COMMAND = 'idmint kafka init';

function checkTag(bizTag: string): void {
  if (!BIZ_TAG_PATTERN.test(bizTag)) throw new BadRequestError(`invalid biz tag "${bizTag}"`, 'bizTag');
}

/** Partitions of a pool topic: the most SDK instances that read one tag's pool at once (IDMINT_KAFKA_POOL_PARTITIONS). */
export const DEFAULT_POOL_PARTITIONS = 16;

/**
 * Pool-topic configs: blocks older than a day are deleted, well before Kafka forgets an idle
 * group's offsets (7 days), so a group that returns can never replay blocks it already handed out.
 */
export const POOL_TOPIC_CONFIGS: Readonly<Record<string, string>> = Object.freeze({ 'retention.ms': String(86_400_000), 'segment.ms': String(3_600_000) });

/**
 * A namespace (IDMINT_KAFKA_NAMESPACE, the SDK's `namespace`): one deployment's topics and groups
 * on a Kafka cluster it shares with another, e.g. a second region. `eu` gives `idmint.eu.requests`,
 * `idmint.eu.responders`, `idmint.eu.ids.<tag>` and `idmint.eu.pool.<tag>`. Names the default
 * namespace uses as their second part are refused, so no namespaced name equals a default one, and
 * `replies` is refused so a pool topic is never a name a client may ask replies on.
 */
export const KAFKA_NAMESPACE_PATTERN = /^[a-z0-9][a-z0-9-]{0,47}$/;
const RESERVED_NAMESPACES = new Set(['ids', 'pool', 'replies', 'requests', 'responders']);

/** Throws BAD_REQUEST for a namespace that is not one (see KAFKA_NAMESPACE_PATTERN). */
export function checkNamespace(namespace: string): void {
  if (!KAFKA_NAMESPACE_PATTERN.test(namespace))
    throw new BadRequestError(`Kafka namespace "${namespace}": lower-case letters, digits and -, at most 48, starting with a letter or digit`, 'namespace');
  if (RESERVED_NAMESPACES.has(namespace))
    throw new BadRequestError(`Kafka namespace "${namespace}" is a name idmint's own topics use; choose another`, 'namespace');
}

/** The topics and groups of one namespace (none: the default `idmint.*` names). */
export interface KafkaNames {
  readonly requestTopic: string;
  readonly responderGroup: string;
  /** What every reply topic's name starts with: a responder replies nowhere else. */
  readonly replyPrefix: string;
  /** What every pool topic's name starts with (an ACL prefix), and every pool group's. */
  readonly poolTopicPrefix: string;
  readonly poolGroupPrefix: string;
  /** A tag's pool topic: `<prefix><tag>` for shard 0, `<prefix><tag>.S<n>` for others. */
  poolTopic(bizTag: string, shard?: number): string;
  /** A tag's one consumer group (the pool-topic contract); shards other than 0 get their own. */
  poolGroup(bizTag: string, shard?: number): string;
}

export function kafkaNames(namespace?: string): KafkaNames {
  if (namespace !== undefined) checkNamespace(namespace);
  const base = namespace === undefined ? 'idmint.' : `idmint.${namespace}.`;
  const topicPrefix = `${base}ids.`;
  const groupPrefix = `${base}pool.`;
  // Tags are lower-case, so the upper-case `S` can never collide with another tag's topic.
  const named =
    (prefix: string) =>
    (bizTag: string, shard = 0): string => {
      checkTag(bizTag);
      return shard === 0 ? `${prefix}${bizTag}` : `${prefix}${bizTag}.S${shard}`;
    };
  return Object.freeze({
    requestTopic: `${base}requests`,
    responderGroup: `${base}responders`,
    replyPrefix: `${base}replies.`,
    poolTopicPrefix: topicPrefix,
    poolGroupPrefix: groupPrefix,
    poolTopic: named(topicPrefix),
    poolGroup: named(groupPrefix),
  });
}

/** The default namespace's names, and its constants taken from them (one source for both). */
const DEFAULT_NAMES = kafkaNames();
export const REQUEST_TOPIC = DEFAULT_NAMES.requestTopic;
export const RESPONDER_GROUP = DEFAULT_NAMES.responderGroup;
export const REPLY_PREFIX = DEFAULT_NAMES.replyPrefix;
export const POOL_TOPIC_PREFIX = DEFAULT_NAMES.poolTopicPrefix;
export const POOL_GROUP_PREFIX = DEFAULT_NAMES.poolGroupPrefix;

/** The default namespace's pool topic: `idmint.ids.<tag>` for shard 0, `idmint.ids.<tag>.S<n>` for others. */
export function poolTopic(bizTag: string, shard = 0): string {
  return DEFAULT_NAMES.poolTopic(bizTag, shard);
}

/** The default namespace's pool group: `idmint.pool.<tag>`, `idmint.pool.<tag>.S<n>`. */
export function poolGroup(bizTag: string, shard = 0): string {
  return DEFAULT_NAMES.poolGroup(bizTag, shard);
}
