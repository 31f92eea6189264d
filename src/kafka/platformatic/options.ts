/**
 * idmint's connection options as @platformatic/kafka's client options, and its errors as the ones
 * idmint recognises. Pure: no client is made here (unit-tested in test/unit/kafka-platformatic-options.test.ts).
 */
import type { KafkaConnectionOptions } from '../ports.js';

/** The part of @platformatic/kafka's BaseOptions idmint sets (structurally; its types stay in this folder). */
export interface PlatformaticBaseOptions {
  clientId: string;
  bootstrapBrokers: string[];
  tls?: { ca?: string[]; cert?: string; key?: string; rejectUnauthorized?: boolean; servername?: string };
  tlsServerName?: string | boolean;
  sasl?: { mechanism: 'PLAIN' | 'SCRAM-SHA-256' | 'SCRAM-SHA-512'; username: string; password: string };
  /** Client side: how long one request waits for its broker's answer. */
  requestTimeout: number;
  connectTimeout?: number;
  retries: number;
  retryDelay: number;
  metadataMaxAge: number;
  autocreateTopics: false;
}

/**
 * How long a request waits for its broker's answer, as the KafkaJS driver's: a hung broker (SIGSTOP,
 * a partition) keeps its sockets open, and only this makes the client ask who leads now.
 * The library's own default is 30 s.
 */
export const REQUEST_TIMEOUT_MS = 5000;
/** Admin requests keep 30 s: a create or delete asks the broker to wait up to 5 s for the change. */
export const ADMIN_REQUEST_TIMEOUT_MS = 30_000;
/** Metadata older than this is refreshed before the next request (the library's default, and the KafkaJS driver's). */
export const METADATA_MAX_AGE_MS = 5000;
/** Retries of a failed request inside the library, and the pause between them. */
const DEFAULT_RETRIES = 5;
const RETRY_DELAY_MS = 250;

/** `host:port,host:port` or an array, as KAFKA_BROKERS gives it. */
export function brokerList(brokers: string[] | string): string[] {
  return (Array.isArray(brokers) ? brokers : brokers.split(',')).map((b) => b.trim()).filter((b) => b.length > 0);
}

const SASL_MECHANISMS = { plain: 'PLAIN', 'scram-sha-256': 'SCRAM-SHA-256', 'scram-sha-512': 'SCRAM-SHA-512' } as const;

/** @platformatic/kafka's base options (brokers, TLS, SASL, timeouts, retries) from idmint's connection options. */
export function platformaticOptions(
  options: KafkaConnectionOptions,
  requestTimeoutMs = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS,
): PlatformaticBaseOptions {
  const base: PlatformaticBaseOptions = {
    clientId: options.clientId ?? 'idmint',
    bootstrapBrokers: brokerList(options.brokers),
    requestTimeout: requestTimeoutMs,
    retries: options.retries ?? DEFAULT_RETRIES,
    retryDelay: RETRY_DELAY_MS,
    metadataMaxAge: METADATA_MAX_AGE_MS,
    autocreateTopics: false,
  };
  const { tls, sasl } = options;
  if (tls === true) base.tls = {};
  else if (tls) {
    const { ca, servername, ...rest } = tls;
    base.tls = { ...rest, ...(ca === undefined ? {} : { ca: Array.isArray(ca) ? ca : [ca] }) };
    if (servername !== undefined) base.tlsServerName = servername;
  }
  // Node's TLS checks the certificate against the host name only when told the name (SNI).
  if (base.tls && base.tlsServerName === undefined) base.tlsServerName = true;
  if (sasl) base.sasl = { mechanism: SASL_MECHANISMS[sasl.mechanism], username: sasl.username, password: sasl.password };
  if (options.connectionTimeoutMs !== undefined) base.connectTimeout = options.connectionTimeoutMs;
  return base;
}

interface LibraryError {
  code?: unknown;
  apiId?: unknown;
  type?: unknown;
  cause?: unknown;
  errors?: unknown;
  message?: unknown;
}

/** The library's errors in `err`: itself, its `cause` and the `errors` of an aggregate, depth first. */
function* errorTree(err: unknown, depth = 0): Generator<LibraryError> {
  if (!err || typeof err !== 'object' || depth > 6) return;
  const e = err as LibraryError;
  yield e;
  if (Array.isArray(e.errors)) for (const inner of e.errors) yield* errorTree(inner, depth + 1);
  if (e.cause) yield* errorTree(e.cause, depth + 1);
}

/** The Kafka protocol error name (UNKNOWN_TOPIC_OR_PARTITION, NOT_COORDINATOR...) the library's error carries, if any. */
export function protocolErrorName(err: unknown): string | undefined {
  for (const e of errorTree(err)) if (typeof e.apiId === 'string') return e.apiId;
  return undefined;
}

/**
 * The library's error as idmint's recognisers (../errors.ts) read it: the protocol error's name as
 * `type`, and that error as `cause`, on the error thrown. Returns `err`.
 */
export function typed<T>(err: T): T {
  const e = err as LibraryError | null;
  if (!e || typeof e !== 'object' || typeof e.type === 'string') return err;
  for (const inner of errorTree(err)) {
    if (typeof inner.apiId !== 'string') continue;
    try {
      e.type = inner.apiId;
      if (inner !== e && e.cause === undefined) e.cause = inner;
    } catch {
      // A frozen error stays as it is.
    }
    break;
  }
  return err;
}

/** An error raised by @platformatic/kafka (its codes start PLT_KFK_), itself or wrapped. */
export function isLibraryError(err: unknown): boolean {
  for (const e of errorTree(err)) if (typeof e.code === 'string' && e.code.startsWith('PLT_KFK_')) return true;
  return false;
}

/**
 * The send failed because the broker refused the idempotent producer an id (InitProducerId: a
 * fresh cluster's transaction coordinator still loading, or moving): no record was sent, so sending
 * again is safe. An error that also tells of a Produce request is never this: that request may
 * have landed.
 */
export function isProducerIdRefusal(err: unknown): boolean {
  const messages = [...errorTree(err)].map((e) => (typeof e.message === 'string' ? e.message : ''));
  return messages.some((m) => m.includes('InitProducerId')) && !messages.some((m) => /\bProduce\(/.test(m));
}

/** The brokers refused the credentials. */
export function isLibraryAuthFailure(err: unknown): boolean {
  for (const e of errorTree(err)) {
    if (e.code === 'PLT_KFK_AUTHENTICATION' || e.apiId === 'SASL_AUTHENTICATION_FAILED' || e.apiId === 'UNSUPPORTED_SASL_MECHANISM') return true;
  }
  return false;
}
