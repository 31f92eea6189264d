import { AclOperationTypes, AclPermissionTypes, AclResourceTypes, ResourcePatternTypes, type Kafka } from 'kafkajs';
import { silentLogger } from '../../src/core/logger.js';
import { createKafka } from '../../src/kafka/kafkajs/client.js';
import { kafkaJsConfig, kafkaJsDriverOf } from '../../src/kafka/kafkajs/index.js';
import { checkKafkaDriver } from '../../src/kafka/driver.js';
import type { KafkaConnectionOptions, KafkaDriverName, TopicAdmin } from '../../src/kafka/ports.js';
import { ensureTopics } from '../../src/kafka/topics.js';
import { POOL_GROUP_PREFIX, POOL_TOPIC_PREFIX } from '../../src/kafka/names.js';
import { env } from './env.js';
import { uniqueName } from './names.js';

/** Kafka for tests: a client on the shared broker, and topics made and dropped by unique name. */

/**
 * The driver idmint's parts run on in the Kafka files: IDMINT_KAFKA_DRIVER (CI's platformatic lane
 * sets it; spawned servers inherit it), default kafkajs.
 */
export const TEST_KAFKA_DRIVER: KafkaDriverName = checkKafkaDriver(process.env.IDMINT_KAFKA_DRIVER || undefined);

/** How idmint's own parts (SDK, responder, sink) reach the shared broker: plain options, the driver loaded on start. */
export function testKafkaOptions(clientId = 'idmint-test'): KafkaConnectionOptions {
  return { brokers: env('KAFKA_BROKERS'), clientId, logger: silentLogger, driver: TEST_KAFKA_DRIVER };
}

/**
 * A KafkaJS instance for a test's own setup (topics, raw records, a group to watch). Given to
 * idmint's parts, it runs them on TEST_KAFKA_DRIVER: with the default, as the (deprecated)
 * KafkaJS instance it is; with another driver, the connection options it also carries.
 */
export function testKafka(
  clientId = 'idmint-test',
  brokers: string = env('KAFKA_BROKERS'),
  options: Omit<KafkaConnectionOptions, 'brokers' | 'clientId' | 'driver' | 'logger'> = {},
): Kafka {
  const kafka = createKafka({ brokers, clientId, logger: silentLogger, config: kafkaJsConfig({ ...options, brokers }) });
  if (TEST_KAFKA_DRIVER === 'kafkajs') return kafka;
  const connection: KafkaConnectionOptions = { ...options, brokers, clientId, driver: TEST_KAFKA_DRIVER };
  return Object.assign(kafka, connection);
}

/** idmint's TopicAdmin port over a test's KafkaJS instance (topics.ts takes the port). */
export function topicAdmin(kafka: Kafka): TopicAdmin {
  return kafkaJsDriverOf(kafka).admin();
}

export async function createTopic(kafka: Kafka, topic: string, numPartitions = 1): Promise<void> {
  const admin = topicAdmin(kafka);
  await admin.connect();
  try {
    await ensureTopics(admin, [{ topic, numPartitions }]);
  } finally {
    await admin.close();
  }
}

export async function deleteTopics(kafka: Kafka, topics: string[]): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.deleteTopics({ topics });
  } catch {
    // Best effort: the topic names are unique per test, so a leftover harms nothing.
  } finally {
    await admin.disconnect();
  }
}

/**
 * Kafka-pool tags (step 1,000) made by one test file: `create` makes one in the store, `made`
 * lists them for the file's afterAll to remove their topics.
 */
export function kafkaPoolTags(store: () => { createBiz(input: { bizTag: string; pool: 'kafka'; step: number }): Promise<unknown> }): {
  readonly made: string[];
  create(prefix: string): Promise<string>;
} {
  const made: string[] = [];
  return {
    made,
    async create(prefix) {
      const bizTag = uniqueName(prefix);
      await store().createBiz({ bizTag, pool: 'kafka', step: 1000 });
      made.push(bizTag);
      return bizTag;
    },
  };
}

/** What docs/client.md grants an SDK's principal: read the pool topics and their groups, nothing else. */
export function sdkPoolAcls(principal: string) {
  return [
    { resourceType: AclResourceTypes.TOPIC, resourceName: POOL_TOPIC_PREFIX, operation: AclOperationTypes.READ },
    { resourceType: AclResourceTypes.TOPIC, resourceName: POOL_TOPIC_PREFIX, operation: AclOperationTypes.DESCRIBE },
    { resourceType: AclResourceTypes.GROUP, resourceName: POOL_GROUP_PREFIX, operation: AclOperationTypes.READ },
  ].map((g) => ({
    ...g,
    resourcePatternType: ResourcePatternTypes.PREFIXED,
    principal: `User:${principal}`,
    host: '*',
    permissionType: AclPermissionTypes.ALLOW,
  }));
}
