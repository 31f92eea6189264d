import { OptionsError } from '../core/options.js';
import type { Logger } from '../core/logger.js';
import { DEFAULT_KAFKA_DRIVER, KAFKA_DRIVERS, type KafkaConnectionOptions, type KafkaDriver, type KafkaDriverName } from './ports.js';

/**
 * Picks and loads a Kafka driver. The driver's folder is imported only here and only when asked
 * for, so a process (or an SDK user) that never talks to Kafka loads no Kafka client.
 */

/**
 * A KafkaJS `Kafka` instance, as the SDK and the server's classes took before idmint's own
 * connection options. Deprecated: pass `KafkaConnectionOptions`. Opaque on purpose: idmint's
 * public types name no Kafka client.
 */
export interface LegacyKafkaInstance {
  admin(...args: never[]): unknown;
  consumer(...args: never[]): unknown;
  producer(...args: never[]): unknown;
}

/** What a Kafka-using part of idmint accepts: connection options (usual), a ready driver, or (deprecated) a KafkaJS instance. */
export type KafkaSource = KafkaConnectionOptions | KafkaDriver | LegacyKafkaInstance;

export function isKafkaDriver(value: unknown): value is KafkaDriver {
  const v = value as Partial<KafkaDriver> | null;
  return typeof v?.reader === 'function' && typeof v.writer === 'function' && typeof v.admin === 'function';
}

/** Validates IDMINT_KAFKA_DRIVER or the SDK's `driver`. */
export function checkKafkaDriver(name: string | undefined): KafkaDriverName {
  const driver = name ?? DEFAULT_KAFKA_DRIVER;
  if (!(KAFKA_DRIVERS as readonly string[]).includes(driver))
    throw new OptionsError('Kafka', 'driver', `must be one of ${KAFKA_DRIVERS.join(', ')}, got ${JSON.stringify(driver)}`);
  return driver as KafkaDriverName;
}

let warnedLegacy = false;

/** The driver for `source`, loading its folder on first use. */
export async function openKafka(source: KafkaSource, logger?: Logger): Promise<KafkaDriver> {
  if (isKafkaDriver(source)) return source;
  if ('brokers' in source && checkKafkaDriver(source.driver) === 'platformatic') {
    const { platformaticDriver } = await import('./platformatic/index.js').catch((err: unknown) => {
      // idmint-client (the SDK alone) leaves this driver's library to the application.
      if ((err as { code?: unknown }).code === 'ERR_MODULE_NOT_FOUND' && String(err).includes('@platformatic/kafka')) {
        throw new OptionsError(
          'Kafka',
          'driver',
          '"platformatic" needs the package @platformatic/kafka beside idmint-client (npm install @platformatic/kafka@2.12.1)',
        );
      }
      throw err;
    });
    return platformaticDriver(source, logger);
  }
  const kafkajs = await import('./kafkajs/index.js');
  if ('brokers' in source && !kafkajs.isKafkaJsInstance(source)) return kafkajs.kafkaJsDriver({ ...source, ...(source.logger || !logger ? {} : { logger }) });
  if (!warnedLegacy) {
    warnedLegacy = true;
    logger?.warn('a KafkaJS instance passed as `kafka` is deprecated: pass { brokers, clientId, tls, sasl, logger } instead');
  }
  return kafkajs.kafkaJsDriverOf(source as never, logger);
}
