/**
 * The KafkaJS driver: idmint's Kafka ports (../ports.ts) over KafkaJS 2.2.4, and every workaround
 * KafkaJS needs (fetch guard, consumer watchdog, rebalance unwrapping, commit re-check, producer
 * and admin replacement, the admin's own timeout, its log lines demoted). Loaded by ../driver.ts.
 */
import type { Kafka, KafkaConfig, SASLOptions } from 'kafkajs';
import type { Logger } from '../../core/logger.js';
import { silentLogger } from '../../core/logger.js';
import type { GroupReaderOptions, KafkaConnectionOptions, KafkaDriver, TopicWriterOptions } from '../ports.js';
import { KafkaJsTopicAdmin } from './admin.js';
import { createKafka } from './client.js';
import { TopicProducer } from './producer.js';
import { KafkaJsGroupReader } from './reader.js';

/** KafkaJS's `ssl`, `sasl` and timeouts from idmint's connection options. */
export function kafkaJsConfig(options: KafkaConnectionOptions): Omit<KafkaConfig, 'brokers' | 'clientId' | 'logCreator' | 'logLevel'> {
  const config: Omit<KafkaConfig, 'brokers'> = {};
  const { tls, sasl } = options;
  if (tls === true) config.ssl = true;
  else if (tls) config.ssl = { ...tls, ...(tls.ca === undefined ? {} : { ca: Array.isArray(tls.ca) ? tls.ca : [tls.ca] }) };
  if (sasl) config.sasl = { ...sasl } as SASLOptions;
  if (options.requestTimeoutMs !== undefined) config.requestTimeout = options.requestTimeoutMs;
  if (options.connectionTimeoutMs !== undefined) {
    config.connectionTimeout = options.connectionTimeoutMs;
    config.authenticationTimeout = options.connectionTimeoutMs;
  }
  if (options.retries !== undefined) config.retry = { retries: options.retries, initialRetryTime: 100, maxRetryTime: 500 };
  return config;
}

/** A KafkaJS instance (made by createKafka, or the caller's own) behind idmint's ports. */
export function kafkaJsDriverOf(kafka: Kafka, logger: Logger = silentLogger): KafkaDriver {
  return {
    name: 'kafkajs',
    admin: () => new KafkaJsTopicAdmin(kafka),
    writer: (options: TopicWriterOptions = {}) =>
      options.appendOnce ? new TopicProducer(kafka, logger, { idempotent: true, maxInFlightRequests: 1 }, true) : new TopicProducer(kafka, logger),
    reader: (options: GroupReaderOptions) => new KafkaJsGroupReader(kafka, options),
    isClientError: (err) => errorNames(err).some((name) => name.startsWith('KafkaJS')),
    isAuthFailure: (err) => errorNames(err).includes('KafkaJSSASLAuthenticationError'),
  };
}

export function kafkaJsDriver(options: KafkaConnectionOptions): KafkaDriver {
  const kafka = createKafka({ brokers: options.brokers, clientId: options.clientId, logger: options.logger, config: kafkaJsConfig(options) });
  return kafkaJsDriverOf(kafka, options.logger);
}

/** The names of `err` and the errors KafkaJS wrapped in it (`originalError`, `cause`). */
function errorNames(err: unknown): string[] {
  const names: string[] = [];
  for (
    let e = err as { name?: unknown; originalError?: unknown; cause?: unknown } | undefined;
    e && names.length < 5;
    e = (e.originalError ?? e.cause) as typeof e
  ) {
    if (typeof e.name === 'string') names.push(e.name);
  }
  return names;
}

/** A KafkaJS `Kafka` instance, as the SDK accepted before its own connection options (deprecated). */
export function isKafkaJsInstance(value: unknown): value is Kafka {
  const v = value as { admin?: unknown; consumer?: unknown; producer?: unknown } | null;
  return typeof v?.admin === 'function' && typeof v.consumer === 'function' && typeof v.producer === 'function';
}
