import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import type { KafkaConfig, SASLOptions } from 'kafkajs';
import type { Config } from './config.js';

/**
 * What each client needs to reach a secured server, from the config: Redis TLS (`rediss://`,
 * the user and password in REDIS_URL), Kafka TLS and SASL, ZooKeeper digest credentials.
 * Postgres reads its own from DATABASE_URL (`sslmode=verify-full&sslrootcert=...`).
 */

/** ioredis's `tls` for a `rediss://` URL with a private CA; nothing for `redis://`. */
export function redisTls(config: Pick<Config, 'REDIS_URL' | 'IDMINT_REDIS_TLS_CA'>): { tls?: ConnectionOptions } {
  if (!config.REDIS_URL?.startsWith('rediss:')) return {};
  return { tls: config.IDMINT_REDIS_TLS_CA ? { ca: readFileSync(config.IDMINT_REDIS_TLS_CA, 'utf8') } : {} };
}

/** KafkaJS's `ssl` and `sasl`. */
export function kafkaSecurity(
  config: Pick<Config, 'IDMINT_KAFKA_TLS' | 'IDMINT_KAFKA_TLS_CA' | 'IDMINT_KAFKA_SASL_MECHANISM' | 'IDMINT_KAFKA_SASL_USERNAME' | 'IDMINT_KAFKA_SASL_PASSWORD'>,
): Pick<KafkaConfig, 'ssl' | 'sasl'> {
  const tls = config.IDMINT_KAFKA_TLS === 'true' || (config.IDMINT_KAFKA_TLS === undefined && config.IDMINT_KAFKA_TLS_CA !== undefined);
  const out: Pick<KafkaConfig, 'ssl' | 'sasl'> = {};
  if (tls) out.ssl = config.IDMINT_KAFKA_TLS_CA ? { ca: [readFileSync(config.IDMINT_KAFKA_TLS_CA, 'utf8')] } : true;
  const { IDMINT_KAFKA_SASL_MECHANISM: mechanism, IDMINT_KAFKA_SASL_USERNAME: username, IDMINT_KAFKA_SASL_PASSWORD: password } = config;
  if (mechanism && username && password) out.sasl = { mechanism, username, password } as SASLOptions;
  return out;
}

/** ZooKeeper digest credentials (`user:password`), if any. */
export function zkAuth(config: Pick<Config, 'IDMINT_ZK_AUTH'>): { auth?: string } {
  return config.IDMINT_ZK_AUTH ? { auth: config.IDMINT_ZK_AUTH } : {};
}
