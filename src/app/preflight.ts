import { ConfigError } from '../core/errors.js';
import { redactUrl } from '../core/redact.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { sqlState } from '../store/errors.js';
import type { Config } from './config.js';
import { redisTarget, usesRedis } from './connections.js';

/**
 * Credentials and certificates are checked once, at start: a wrong password or a certificate
 * that does not verify stops the process with one line naming the server and the variable to
 * fix. A server that is merely down is left to the usual handling (fallbacks, retries): it may
 * come back, a wrong password will not.
 */
export async function checkCredentials(config: Config, logger: Logger): Promise<void> {
  await Promise.all([usesRedis(config) ? checkRedis(config, logger) : undefined, config.KAFKA_BROKERS ? checkKafka(config, logger) : undefined]);
}

const DEADLINE_MS = 3000;
const TLS_FAILURE = /certificate|self[- ]signed|unable to verify|altname|ERR_TLS|SSL routines|wrong version number/i;

function describe(err: unknown): string {
  const e = err as { message?: string; code?: string };
  return [e.code && !String(e.message).includes(e.code) ? e.code : undefined, e.message ?? String(err)].filter(Boolean).join(': ');
}

async function checkRedis(config: Config, logger: Logger): Promise<void> {
  const target = redisTarget(config);
  const url = target.where;
  // Loaded only when Redis is configured, as KafkaJS below: the embedded default loads neither.
  const { redisClientFor } = await import('../pool/redis/connection.js');
  const client = redisClientFor(target, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: DEADLINE_MS,
    enableOfflineQueue: false,
  });
  // connect() rejects with "Connection is closed"; the reason arrives as an 'error' event.
  let reason: unknown;
  // A Cluster reports each node's failure (a refused password, TLS) as a 'node error', then an
  // 'error' "Failed to refresh slots cache" whose lastNodeError is the node's reason.
  client.on('error', (err: unknown) => void (reason = (err as { lastNodeError?: unknown }).lastNodeError ?? err));
  client.on('node error', (err: unknown) => void (reason = err));
  try {
    await client.connect();
    await client.ping();
  } catch (thrown) {
    const err = reason ?? thrown;
    const message = describe(err);
    if (/^(WRONGPASS|NOAUTH|NOPERM)/.test(message) || /invalid username-password|ERR AUTH/i.test(message)) {
      throw new ConfigError(`Redis at ${url} refused idmint's credentials (${message}); check the user and password in REDIS_URL`, 'REDIS_URL', { cause: err });
    }
    if (TLS_FAILURE.test(message)) {
      throw new ConfigError(`Redis at ${url}: TLS failed (${message}); check REDIS_URL (rediss://) and IDMINT_REDIS_TLS_CA`, 'REDIS_URL', { cause: err });
    }
    logger.warn({ redis: url, err: message }, 'Redis did not answer at start; serving by fallback until it does');
  } finally {
    client.disconnect();
  }
}

async function checkKafka(config: Config, logger: Logger): Promise<void> {
  // Silent: the one line below says what failed, without KafkaJS's own lines around it.
  const { kafkaFor } = await import('./kafka-client.js');
  const { openKafka } = await import('../kafka/driver.js');
  const kafka = kafkaFor(config, 'idmint-preflight', silentLogger, { retries: 0, connectionTimeoutMs: DEADLINE_MS, requestTimeoutMs: DEADLINE_MS });
  const driver = await openKafka(kafka);
  const admin = driver.admin();
  try {
    await admin.connect();
  } catch (err) {
    const message = describe(err);
    if (driver.isAuthFailure(err) || /SASL|authentication/i.test(message)) {
      throw new ConfigError(
        `Kafka at ${config.KAFKA_BROKERS} refused idmint's credentials (${message}); check IDMINT_KAFKA_SASL_MECHANISM, _USERNAME and _PASSWORD`,
        'IDMINT_KAFKA_SASL_USERNAME',
        { cause: err },
      );
    }
    if (TLS_FAILURE.test(message)) {
      throw new ConfigError(
        `Kafka at ${config.KAFKA_BROKERS}: TLS failed (${message}); check IDMINT_KAFKA_TLS and IDMINT_KAFKA_TLS_CA`,
        'IDMINT_KAFKA_TLS_CA',
        { cause: err },
      );
    }
    logger.warn({ brokers: config.KAFKA_BROKERS, err: message }, 'Kafka did not answer at start; its roles keep trying');
  } finally {
    await admin.close().catch(() => undefined);
  }
}

/** Postgres's answer to a wrong password or certificate, as one line naming DATABASE_URL; other errors as they are. */
export function postgresCredentialError(url: string, err: unknown): unknown {
  const code = sqlState(err);
  const message = describe(err);
  if (code?.startsWith('28')) {
    return new ConfigError(
      `Postgres at ${redactUrl(url)} refused idmint's credentials (${message}); check the user, password and sslmode in DATABASE_URL`,
      'DATABASE_URL',
      {
        cause: err,
      },
    );
  }
  if (TLS_FAILURE.test(message) || /does not support SSL/i.test(message)) {
    return new ConfigError(`Postgres at ${redactUrl(url)}: TLS failed (${message}); check sslmode and sslrootcert in DATABASE_URL`, 'DATABASE_URL', {
      cause: err,
    });
  }
  return err;
}
