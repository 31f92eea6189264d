import { Kafka, logLevel } from 'kafkajs';
import type { KafkaConfig, LogEntry, logCreator } from 'kafkajs';
import type { Logger } from '../core/logger.js';
import { silentLogger } from '../core/logger.js';

/**
 * Kafka client construction shared by the responder, the client and the pool topics:
 * KafkaJS logs go into pino, and KafkaJS's chatty INFO lines become pino `debug`.
 */

export interface CreateKafkaOptions {
  brokers: string[] | string;
  /** Default `idmint`. */
  clientId?: string;
  logger?: Logger;
  /** Extra KafkaJS settings (retry, connectionTimeout...). */
  config?: Omit<KafkaConfig, 'brokers' | 'clientId' | 'logCreator' | 'logLevel'>;
}

/** `host:port,host:port` or an array, as KAFKA_BROKERS gives it. */
export function parseBrokers(brokers: string[] | string): string[] {
  const list = Array.isArray(brokers) ? brokers : brokers.split(',');
  return list.map((b) => b.trim()).filter((b) => b.length > 0);
}

export function pinoLogCreator(logger: Logger): logCreator {
  return () =>
    ({ namespace, level, log }: LogEntry) => {
      const { message, timestamp: _ts, ...extra } = log;
      const fields = { kafkajs: namespace, ...extra };
      if (level === logLevel.ERROR) logger.error(fields, message);
      else if (level === logLevel.WARN) logger.warn(fields, message);
      else if (level === logLevel.INFO) logger.debug(fields, message);
      else logger.trace(fields, message);
    };
}

export function createKafka(options: CreateKafkaOptions): Kafka {
  const logger = (options.logger ?? silentLogger).child({ component: 'kafkajs' });
  // Only ask KafkaJS for what pino will print: its DEBUG level is costly to format.
  const level = logger.isLevelEnabled('trace') ? logLevel.DEBUG : logger.isLevelEnabled('debug') ? logLevel.INFO : logLevel.WARN;
  return new Kafka({
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 2000 },
    ...options.config,
    brokers: parseBrokers(options.brokers),
    clientId: options.clientId ?? 'idmint',
    logLevel: level,
    logCreator: pinoLogCreator(logger),
  });
}
