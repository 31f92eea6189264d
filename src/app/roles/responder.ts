import type { Registry } from 'prom-client';
import type { Logger } from '../../core/logger.js';
import type { IdDispenser } from '../../core/ports.js';
import { initTopics, logUnderReplicated, underReplicated } from '../../kafka/topics.js';
import { kafkaNames } from '../../kafka/names.js';
import type { SigningKey } from '../../kafka/signing.js';
import { createResponder, type Responder } from '../../kafka/responder.js';
import type { Config } from '../config.js';
import { kafkaFor } from '../kafka-client.js';
import { openKafka } from '../../kafka/driver.js';
import type { KafkaConnectionOptions } from '../../kafka/ports.js';

export interface ResponderRoleOptions {
  config: Config;
  logger: Logger;
  /** The process's dispenser: a responder alone has the same pools and fallbacks as the API. */
  dispenser: IdDispenser;
  /** The deployment's signing key (src/app/signing.ts): every reply is signed. */
  signer: () => SigningKey | undefined;
  registry?: Registry;
}

/** The responder role: answers ID requests on the request topic. Resolves once it has joined its group. */
export async function startResponderRole(options: ResponderRoleOptions): Promise<Responder> {
  const { config, logger } = options;
  const kafka = kafkaFor(config, 'idmint-responder', logger);
  const responder = createResponder({
    kafka,
    dispenser: options.dispenser,
    groupId: config.IDMINT_KAFKA_RESPONDER_GROUP,
    requestTopic: config.IDMINT_KAFKA_REQUEST_TOPIC,
    replyPrefix: kafkaNames(config.IDMINT_KAFKA_NAMESPACE).replyPrefix,
    signer: options.signer,
    maxCount: config.IDMINT_MAX_COUNT,
    maxBlockCount: config.IDMINT_MAX_BLOCK_COUNT,
    sessionTimeoutMs: config.IDMINT_KAFKA_SESSION_TIMEOUT_MS,
    logger,
    ...(options.registry ? { registry: options.registry } : {}),
  });
  try {
    if (config.IDMINT_KAFKA_CREATE_TOPICS === 'true') await createRequestTopic(kafka, config, logger);
    await responder.start();
  } catch (err) {
    await responder.close().catch(() => undefined);
    throw err;
  }
  return responder;
}

/** Creates the request topic when it is missing (idempotent), with the configured partitions and retention. */
async function createRequestTopic(kafka: KafkaConnectionOptions, config: Config, logger: Logger): Promise<void> {
  const admin = (await openKafka(kafka, logger)).admin();
  await admin.connect();
  try {
    const created = await initTopics(admin, {
      requestTopic: config.IDMINT_KAFKA_REQUEST_TOPIC,
      requestPartitions: config.IDMINT_KAFKA_PARTITIONS,
      requestRetentionMs: config.IDMINT_KAFKA_REQUEST_RETENTION_MS,
      replicationFactor: config.IDMINT_KAFKA_REPLICATION_FACTOR,
    });
    if (created.length > 0) logger.info({ created }, 'created missing Kafka topics (IDMINT_KAFKA_CREATE_TOPICS=false turns this off)');
    else logUnderReplicated(logger, await underReplicated(admin, [config.IDMINT_KAFKA_REQUEST_TOPIC], config.IDMINT_KAFKA_REPLICATION_FACTOR));
  } finally {
    await admin.close();
  }
}
