import type { Logger } from '../core/logger.js';
import type { KafkaConnectionOptions } from '../kafka/ports.js';
import type { Config } from './config.js';
import { kafkaSecurity } from './connections.js';

/**
 * How to reach KAFKA_BROKERS with the configured driver, TLS and SASL: plain options, so nothing
 * here loads a Kafka client; the driver is loaded by whoever first talks to Kafka.
 */
export function kafkaFor(config: Config, clientId: string, logger: Logger, extra: Partial<KafkaConnectionOptions> = {}): KafkaConnectionOptions {
  if (!config.KAFKA_BROKERS) throw new Error('kafkaFor: KAFKA_BROKERS is not set');
  return { ...extra, brokers: config.KAFKA_BROKERS, clientId, logger, driver: config.IDMINT_KAFKA_DRIVER, ...kafkaSecurity(config) };
}
