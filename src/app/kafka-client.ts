import type { Kafka } from 'kafkajs';
import type { Logger } from '../core/logger.js';
import { createKafka, type CreateKafkaOptions } from '../kafka/kafkajs/client.js';
import type { Config } from './config.js';
import { kafkaSecurity } from './connections.js';

/**
 * A KafkaJS client for KAFKA_BROKERS with the configured TLS and SASL. In a module of its own, so
 * a process without Kafka never loads KafkaJS.
 */
export function kafkaFor(config: Config, clientId: string, logger: Logger, extra: CreateKafkaOptions['config'] = {}): Kafka {
  if (!config.KAFKA_BROKERS) throw new Error('kafkaFor: KAFKA_BROKERS is not set');
  return createKafka({ brokers: config.KAFKA_BROKERS, clientId, logger, config: { ...extra, ...kafkaSecurity(config) } });
}
