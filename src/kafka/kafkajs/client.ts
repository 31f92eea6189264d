import { Kafka, logLevel } from 'kafkajs';
import type { Admin, AdminConfig, Consumer, ConsumerConfig, KafkaConfig, LogEntry, logCreator, Producer, ProducerConfig } from 'kafkajs';
import type { Logger } from '../../core/logger.js';
import { silentLogger } from '../../core/logger.js';
import { Episode } from '../../core/episode.js';
import { installFetchGuard } from './fetch-guard.js';
import { installQueueGuard } from './queue-guard.js';

/**
 * Kafka client construction shared by the responder, the client and the pool topics:
 * KafkaJS logs go into pino; its chatty INFO lines and its retried start-up conditions become pino `debug`.
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

/**
 * What KafkaJS reports at ERROR or WARN but retries by itself on a normal start or rebalance: a
 * group coordinator still loading or moving (a fresh or restarted broker), a leader election, a
 * topic just created that a broker's metadata does not hold yet ("does not host this
 * topic-partition": CI's first start on a fresh broker logged it once), the note that a configured
 * `retries` "may invalidate EoS guarantees" (idmint never relies on exactly-once: a lost reply is
 * a gap). Logged at debug; a real failure surfaces as the caller's error.
 */
const EXPECTED =
  /coordinator (is )?not available|coordinator is loading|not the correct coordinator|leadership election|no leader for this topic-partition|does not host this topic-partition|invalidate EoS guarantees|group is rebalancing|not aware of this member/i;

export function isExpectedKafkaCondition(message: string, error: unknown): boolean {
  return EXPECTED.test(message) || (typeof error === 'string' && EXPECTED.test(error));
}

/** The line KafkaJS logs at ERROR after every retriable consumer crash; it carries no error of its own. */
const RESTART = /^Restarting the consumer in \d+(\.\d+)?ms$/;

/**
 * What KafkaJS logs, at ERROR or WARN, for every attempt while a broker cannot be reached: each
 * connection refused or timed out, each seed broker tried, each crash and restart of a consumer
 * (about 180 lines a minute from a responder, 400 from a refill while Kafka was down). These are
 * one outage: one episode per client (core/episode.ts, `"dependency":"kafka"`).
 */
const UNREACHABLE =
  /ECONNREFUSED|ECONNRESET|EHOSTUNREACH|ENETUNREACH|ETIMEDOUT|EPIPE|Connection (error|timeout|closed)|Closed connection|connect to seed broker|KafkaJSConnection|Broker not connected|Request .* timed out|KafkaJSRequestTimeoutError/i;

/** The episode ends when a consumer joins its group again, or once no such line came for this long (a producer says nothing when it is back). */
export const QUIET_MS = 15_000;

export function isUnreachableLine(message: string, error: unknown): boolean {
  if (isExpectedKafkaCondition(message, error)) return false;
  return UNREACHABLE.test(message) || (typeof error === 'string' && UNREACHABLE.test(error));
}

export function pinoLogCreator(logger: Logger): logCreator {
  // A restart is as expected as the crash before it: on a fresh Kafka 4 broker the first JoinGroup
  // can meet COORDINATOR_LOAD_IN_PROGRESS, and KafkaJS crashes the consumer and restarts it. So
  // remember, per group, whether its last crash was demoted; an unexpected crash stays loud, and
  // so does its restart.
  const expectedCrash = new Set<string>();
  const outage = new Episode(logger, 'Kafka unreachable; its clients keep retrying', { dependency: 'kafka' });
  let quiet: NodeJS.Timeout | undefined;
  const unreachable = (fields: Record<string, unknown>, reason: string): void => {
    outage.fail(fields, reason);
    clearTimeout(quiet);
    quiet = setTimeout(() => outage.recover({ quietMs: QUIET_MS }), QUIET_MS);
    quiet.unref();
  };
  return () =>
    ({ namespace, level, log }: LogEntry) => {
      const { message, timestamp: _ts, ...extra } = log;
      const fields = { kafkajs: namespace, ...extra };
      const loud = level === logLevel.ERROR || level === logLevel.WARN;
      const group = String((extra as { groupId?: unknown }).groupId ?? '');
      const error = (extra as { error?: unknown }).error;
      if (
        loud &&
        (isUnreachableLine(message, error) || (outage.active && (message.startsWith('Crash: ') || RESTART.test(message)) && !expectedCrash.has(group)))
      ) {
        expectedCrash.delete(group);
        return unreachable(fields, typeof error === 'string' ? `${message}: ${error}` : message);
      }
      if (outage.active && /has joined the group/.test(message)) {
        clearTimeout(quiet);
        outage.recover({ kafkajs: namespace });
      }
      let expected = loud && isExpectedKafkaCondition(message, error);
      if (loud && message.startsWith('Crash: ')) {
        if (expected) expectedCrash.add(group);
        else expectedCrash.delete(group);
      } else if (loud && RESTART.test(message)) expected = expectedCrash.delete(group);
      if (expected) logger.debug(fields, message);
      else if (level === logLevel.ERROR) logger.error(fields, message);
      else if (level === logLevel.WARN) logger.warn(fields, message);
      else if (level === logLevel.INFO) logger.debug(fields, message);
      else logger.trace(fields, message);
    };
}

/**
 * How long a request waits for its broker's answer (KafkaJS: 30 s). A hung broker (SIGSTOP, a
 * partition) keeps its sockets open; only this timeout makes the client refresh its metadata and
 * go to the partition's new leader, which the cluster elects once it fences the broker (seconds).
 * Fetches wait their long-poll time on top of it.
 */
export const REQUEST_TIMEOUT_MS = 5000;

/**
 * How old a producer's or consumer's metadata may get before its next request refreshes it
 * (KafkaJS: 5 min). KafkaJS retries a timed-out produce on the same broker without asking who
 * leads now; with this, the retry after a timeout finds the leader elected meanwhile.
 */
export const METADATA_MAX_AGE_MS = REQUEST_TIMEOUT_MS;

/**
 * Admin requests keep KafkaJS's 30 s: creating or deleting a topic asks the broker to wait up to
 * 5 s for the change, and a client that gave up first would retry an operation already done.
 */
export const ADMIN_REQUEST_TIMEOUT_MS = 30_000;

/** KafkaJS's client with idmint's defaults for the producers, consumers and admins it makes. */
class IdmintKafka extends Kafka {
  private readonly forAdmin: Kafka;

  constructor(config: KafkaConfig) {
    super(config);
    installQueueGuard();
    // Each producer, consumer and admin opens its own connections: a second client costs nothing.
    this.forAdmin = new Kafka({ ...config, requestTimeout: ADMIN_REQUEST_TIMEOUT_MS });
  }

  override admin(config?: AdminConfig): Admin {
    return this.forAdmin.admin(config);
  }

  override producer(config: ProducerConfig = {}): Producer {
    return super.producer({ metadataMaxAge: METADATA_MAX_AGE_MS, ...config });
  }

  override consumer(config: ConsumerConfig): Consumer {
    installFetchGuard();
    return super.consumer({ metadataMaxAge: METADATA_MAX_AGE_MS, ...config });
  }
}

export function createKafka(options: CreateKafkaOptions): Kafka {
  const logger = (options.logger ?? silentLogger).child({ component: 'kafkajs' });
  // Only ask KafkaJS for DEBUG when pino prints it: that level is costly to format.
  // INFO at least: its 'has joined the group' line ends a Kafka outage's log episode (logged at debug).
  const level = logger.isLevelEnabled('trace') ? logLevel.DEBUG : logLevel.INFO;
  return new IdmintKafka({
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 2000 },
    requestTimeout: REQUEST_TIMEOUT_MS,
    ...options.config,
    brokers: parseBrokers(options.brokers),
    clientId: options.clientId ?? 'idmint',
    logLevel: level,
    logCreator: pinoLogCreator(logger),
  });
}
