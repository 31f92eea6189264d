import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import type { RedisOptions } from 'ioredis';
import type { KafkaConnectionOptions } from '../kafka/ports.js';
import { redactUrl } from '../core/redact.js';
import type { Config } from './config.js';

/**
 * What each client needs to reach a secured server, from the config: Redis TLS (`rediss://`,
 * the user and password in REDIS_URL), Kafka TLS and SASL, ZooKeeper digest credentials.
 * Postgres reads its own from DATABASE_URL (`sslmode=verify-full&sslrootcert=...`).
 */

/** Where the pools' Redis is: a URL, Sentinel options, or a Cluster's nodes; `where` names it without secrets. */
export interface RedisTarget {
  url?: string;
  options: RedisOptions;
  /** Redis Cluster: nodes to start from (`options` then apply to every node). */
  cluster?: Array<{ host: string; port: number }>;
  where: string;
}

type RedisConfig = Pick<
  Config,
  'REDIS_URL' | 'REDIS_SENTINELS' | 'REDIS_SENTINEL_NAME' | 'REDIS_SENTINEL_PASSWORD' | 'REDIS_CLUSTER_NODES' | 'IDMINT_REDIS_TLS_CA'
>;

/** Whether the process has Redis: a URL, sentinels that name its master, or a Cluster's nodes. */
export function usesRedis(config: Pick<Config, 'REDIS_URL' | 'REDIS_SENTINELS' | 'REDIS_CLUSTER_NODES'>): boolean {
  return config.REDIS_URL !== undefined || config.REDIS_SENTINELS !== undefined || config.REDIS_CLUSTER_NODES !== undefined;
}

/**
 * The refill queue's BullMQ prefix. On a Redis Cluster every key of a queue must share one slot
 * (BullMQ's scripts touch several), so the prefix becomes a hash tag, `{bull}`: BullMQ's documented
 * Cluster pattern. Every process computes the same from the same config.
 */
export function refillPrefix(config: Pick<Config, 'REDIS_CLUSTER_NODES' | 'IDMINT_REFILL_PREFIX'>): string {
  return config.REDIS_CLUSTER_NODES === undefined ? config.IDMINT_REFILL_PREFIX : `{${config.IDMINT_REFILL_PREFIX}}`;
}

function hostPorts(list: string): Array<{ host: string; port: number }> {
  return list.split(',').map((hp) => {
    const at = hp.lastIndexOf(':');
    return { host: hp.slice(0, at), port: Number(hp.slice(at + 1)) };
  });
}

/**
 * How to reach the pools' Redis: a URL; with REDIS_SENTINELS the master Sentinel names
 * (ioredis asks the sentinels for it and reconnects on their `+switch-master`); or with
 * REDIS_CLUSTER_NODES a Redis Cluster — each with the user, password (and, but for a Cluster,
 * database) and TLS of REDIS_URL if given. `where` names it in logs (no secrets).
 */
export function redisTarget(config: RedisConfig): RedisTarget {
  const tls = redisTls(config);
  const url = config.REDIS_URL ? new URL(config.REDIS_URL) : undefined;
  const credentials: RedisOptions = {
    ...(url?.username ? { username: decodeURIComponent(url.username) } : {}),
    ...(url?.password ? { password: decodeURIComponent(url.password) } : {}),
  };
  if (config.REDIS_CLUSTER_NODES !== undefined) {
    return { cluster: hostPorts(config.REDIS_CLUSTER_NODES), options: { ...credentials, ...tls }, where: `redis cluster via ${config.REDIS_CLUSTER_NODES}` };
  }
  if (config.REDIS_SENTINELS === undefined) return { url: config.REDIS_URL!, options: { ...tls }, where: redactUrl(config.REDIS_URL!) };
  const sentinels = hostPorts(config.REDIS_SENTINELS);
  const db = url && url.pathname.length > 1 ? Number(url.pathname.slice(1)) : undefined;
  const options: RedisOptions = {
    sentinels,
    name: config.REDIS_SENTINEL_NAME!,
    // Subscribe to the sentinels' +switch-master and reconnect at once: a master that hangs
    // (SIGSTOP, a partition) keeps its socket open, and without this the client would wait on it
    // for as long as it hangs, then talk to it as a demoted replica.
    failoverDetector: true,
    // A demoted master answers writes with READONLY: reconnect (the sentinels name the new
    // master); the command is not resent (it did not run; its caller fails and retries).
    reconnectOnError: (err: Error) => (err.message.startsWith('READONLY') ? 1 : false),
    ...(config.REDIS_SENTINEL_PASSWORD ? { sentinelPassword: config.REDIS_SENTINEL_PASSWORD } : {}),
    ...credentials,
    ...(db !== undefined && Number.isInteger(db) ? { db } : {}),
    ...tls,
    ...(tls.tls ? { enableTLSForSentinelMode: true, sentinelTLS: tls.tls } : {}),
  };
  return { options, where: `sentinel master "${config.REDIS_SENTINEL_NAME}" via ${config.REDIS_SENTINELS}` };
}

/** ioredis's `tls` for a `rediss://` URL with a private CA; nothing for `redis://`. */
function redisTls(config: Pick<Config, 'REDIS_URL' | 'IDMINT_REDIS_TLS_CA'>): { tls?: ConnectionOptions } {
  if (!config.REDIS_URL?.startsWith('rediss:')) return {};
  return { tls: config.IDMINT_REDIS_TLS_CA ? { ca: readFileSync(config.IDMINT_REDIS_TLS_CA, 'utf8') } : {} };
}

/** Kafka's `tls` and `sasl`, in idmint's own connection options (every driver takes them). */
export function kafkaSecurity(
  config: Pick<
    Config,
    'IDMINT_KAFKA_TLS' | 'IDMINT_KAFKA_TLS_CA' | 'IDMINT_KAFKA_SASL_MECHANISM' | 'IDMINT_KAFKA_SASL_USERNAME' | 'IDMINT_KAFKA_SASL_PASSWORD'
  >,
): Pick<KafkaConnectionOptions, 'tls' | 'sasl'> {
  const tls = config.IDMINT_KAFKA_TLS === 'true' || (config.IDMINT_KAFKA_TLS === undefined && config.IDMINT_KAFKA_TLS_CA !== undefined);
  const out: Pick<KafkaConnectionOptions, 'tls' | 'sasl'> = {};
  if (tls) out.tls = config.IDMINT_KAFKA_TLS_CA ? { ca: [readFileSync(config.IDMINT_KAFKA_TLS_CA, 'utf8')] } : true;
  const { IDMINT_KAFKA_SASL_MECHANISM: mechanism, IDMINT_KAFKA_SASL_USERNAME: username, IDMINT_KAFKA_SASL_PASSWORD: password } = config;
  if (mechanism && username && password) out.sasl = { mechanism, username, password };
  return out;
}

/** ZooKeeper digest credentials (`user:password`), if any. */
export function zkAuth(config: Pick<Config, 'IDMINT_ZK_AUTH'>): { auth?: string } {
  return config.IDMINT_ZK_AUTH ? { auth: config.IDMINT_ZK_AUTH } : {};
}
