import { randomUUID } from 'node:crypto';
import { BIZ_TAG_PATTERN } from '../../core/ports.js';
import type { BlocksResult, DispenseResult } from '../../core/ports.js';
import { BadRequestError, IdmintError, TimeoutError, isIdmintError, notReady } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { silentLogger } from '../../core/logger.js';
import { openKafka, type KafkaSource } from '../../kafka/driver.js';
import type { GroupReader, KafkaConnectionOptions, KafkaDriver, OutgoingRecord, TopicAdmin, TopicWriter } from '../../kafka/ports.js';
import { decodeReply, encodeRequest, type IdReply } from '../../kafka/messages.js';
import { replyBytes, type ReplyContent } from '../../kafka/signing.js';
import { Episode } from '../../core/episode.js';
import { retry } from '../../core/retry.js';
import { verifierFrom, type Verification } from './verification.js';
import { assertTopicsExist, ensureTopics } from '../../kafka/topics.js';
import { REQUEST_TOPIC, kafkaNames } from '../../kafka/names.js';
import { isUnknownTopic } from '../../kafka/errors.js';
import { checkInteger, OptionsError, resolveOptions } from '../../core/options.js';
import type { Span } from '@opentelemetry/api';
import { linkReply, replyWaiter, traceKafkaRequest, withTraceHeaders } from '../../tracing/messaging.js';
import type { HeaderRecord } from '../../tracing/propagation.js';

/**
 * Kafka request/reply client. Each client owns a reply topic (created at start, short
 * retention, deleted on clean close) and a correlation map from request id to caller.
 * The first reply for an id wins; a redelivered request's second reply finds no caller and
 * is dropped, so no ID reaches a caller twice.
 */

export interface KafkaClientSettings {
  /** Kafka client id, also part of the reply topic's name. */
  clientId: string;
  requestTopic: string;
  /** Default per-request timeout. */
  timeoutMs: number;
  /** Extra attempts after a TIMEOUT, each a new request id (a late reply to an old id is dropped). */
  retries: number;
  /** retention.ms of the reply topic: replies are useless after the caller's timeout. */
  replyRetentionMs: number;
  joinTimeoutMs: number;
}

export const KAFKA_CLIENT_DEFAULTS: Readonly<KafkaClientSettings> = Object.freeze({
  clientId: 'idmint-client',
  requestTopic: REQUEST_TOPIC,
  timeoutMs: 5000,
  retries: 0,
  replyRetentionMs: 60_000,
  joinTimeoutMs: 30_000,
});

export interface KafkaClientOptions extends Partial<KafkaClientSettings> {
  /** The brokers alone (no TLS or SASL); `kafka` says more. */
  brokers?: string[] | string;
  /**
   * How to reach Kafka: `{ brokers, clientId, tls, sasl, logger, driver }`. (A KafkaJS `Kafka`
   * instance is still accepted, deprecated.) The driver is loaded at start(), not before.
   */
  kafka?: KafkaConnectionOptions | KafkaSource;
  logger?: Logger;
  /** Replication factor of the reply topic. Default min(3, brokers in the cluster). */
  replicationFactor?: number;
  /** The servers' IDMINT_KAFKA_NAMESPACE: requests go to `idmint.<namespace>.requests` unless `requestTopic` says otherwise, replies come on `idmint.<namespace>.replies.*`. */
  namespace?: string;
  /** The deployment's public signing key(s) (`idmint keys public`; default IDMINT_VERIFY_KEY): a reply not signed by one is ignored, and the real one awaited. */
  verifyKey?: string | readonly string[] | undefined;
  /** Accept unsigned replies (whoever reads the request topic could then answer with IDs of their choosing): logged once. */
  insecureSkipVerify?: boolean | undefined;
}

/** Attempts at joining the reply topic's group right after creating it (a new topic's partitions may not be served yet). */
const JOIN_ATTEMPTS = 3;

/** Session (and rebalance) timeout of the reply topic's one-member group. */
const REPLY_SESSION_TIMEOUT_MS = 10_000;

export interface GetIdsOptions {
  timeoutMs?: number;
  retries?: number;
}

interface Pending {
  bizTag: string;
  resolve(result: DispenseResult | BlocksResult): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
  /** The request's span (tracing on): linked to the responder's span the reply names. */
  span: Span | undefined;
}

export class IdmintKafkaClient {
  readonly replyTopic: string;
  /** Replies that found no waiting caller: duplicates from redelivery, or answers after a timeout. */
  droppedReplies = 0;
  /** Messages on the reply topic ignored as not the deployment's: unsigned, badly signed, or malformed. */
  rejectedReplies = 0;
  private readonly verification: Verification;
  private readonly forged: Episode;
  private readonly settings: Readonly<KafkaClientSettings>;
  private readonly kafka: KafkaSource;
  private readonly logger: Logger;
  private readonly groupId: string;
  private driver: KafkaDriver | undefined;
  private admin: TopicAdmin | undefined;
  private producer: TopicWriter | undefined;
  private consumer: GroupReader | undefined;
  private readonly replicationFactor: number | undefined;
  private readonly pending = new Map<string, Pending>();
  /** Requests made in one turn of the event loop go out in one produce request. */
  private outbox: Array<{ id: string; message: OutgoingRecord }> = [];
  private starting: Promise<void> | undefined;
  private closing: Promise<void> | undefined;

  constructor(options: KafkaClientOptions) {
    const { kafka: _kafka, brokers: _brokers, logger: _logger, replicationFactor, namespace, verifyKey, insecureSkipVerify, ...rest } = options;
    this.verification = verifierFrom({ verifyKey, insecureSkipVerify }, 'Kafka client');
    const defaults = namespace === undefined ? KAFKA_CLIENT_DEFAULTS : { ...KAFKA_CLIENT_DEFAULTS, requestTopic: kafkaNames(namespace).requestTopic };
    const s = resolveOptions<KafkaClientSettings>(defaults, rest, (o) => {
      for (const key of ['timeoutMs', 'replyRetentionMs', 'joinTimeoutMs'] as const) checkInteger('Kafka client', o, key, 1);
      checkInteger('Kafka client', o, 'retries', 0);
    });
    if (!options.kafka && !options.brokers) throw new OptionsError('Kafka client', 'brokers', 'or `kafka` is required');
    this.settings = s;
    this.logger = (options.logger ?? silentLogger).child({ component: 'kafka-client' });
    this.forged = new Episode(this.logger, "ignoring messages on the reply topic that are not the deployment's replies (unsigned, badly signed or malformed)");
    if (!this.verification.keys)
      this.logger.warn('insecureSkipVerify: replies are not authenticated; anyone who reads the request topic can answer with IDs of their choosing');
    this.kafka = options.kafka ?? { brokers: options.brokers!, clientId: s.clientId, ...(options.logger ? { logger: options.logger } : {}) };
    const suffix = randomUUID();
    const safeId = s.clientId.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 100);
    this.replyTopic = `${kafkaNames(namespace).replyPrefix}${safeId}.${suffix}`;
    this.groupId = `idmint.client.${safeId}.${suffix}`;
    if (replicationFactor !== undefined) checkInteger('Kafka client', { replicationFactor }, 'replicationFactor', 1);
    this.replicationFactor = replicationFactor;
  }

  private newConsumer(driver: KafkaDriver): GroupReader {
    // The group has one member and commits nothing: short sessions cost nothing, and a consumer
    // that crashed and restarted (a broker lost) rejoins in seconds instead of waiting out its old
    // member's session (KafkaJS: 30 s).
    return driver.reader({
      groupId: this.groupId,
      topic: this.replyTopic,
      commit: { kind: 'none' },
      maxWaitMs: 1000,
      sessionTimeoutMs: REPLY_SESSION_TIMEOUT_MS,
      rebalanceTimeoutMs: REPLY_SESSION_TIMEOUT_MS,
      heartbeatIntervalMs: 1000,
      joinTimeoutMs: this.settings.joinTimeoutMs,
    });
  }

  /** A reader that failed to start or join is dropped: the next start makes a fresh one (readers are single use). */
  private async dropConsumer(): Promise<void> {
    const consumer = this.consumer;
    this.consumer = undefined;
    await consumer?.close().catch(() => undefined);
  }

  start(): Promise<void> {
    if (this.closing) return Promise.reject(new IdmintError('NOT_READY', 'Kafka client is closed'));
    // A broker that cannot be reached is NOT_READY, like every other backing server.
    // A failed start is not kept: the next call starts again (Kafka was down, or a broker was lost).
    const starting = (this.starting ??= this.doStart().catch(async (err: unknown) => {
      await this.dropConsumer();
      if (this.starting === starting) this.starting = undefined;
      throw isIdmintError(err) ? err : notReady('Kafka (client start)', err);
    }));
    return starting;
  }

  /** Up to `count` IDs as decimal strings (invariant 7); throws IdmintError (TIMEOUT, UNKNOWN_BIZ_TAG...). */
  async getIds(bizTag: string, count: number, options: GetIdsOptions = {}): Promise<string[]> {
    return (await this.get(bizTag, count, options)).ids;
  }

  /** `count` IDs of a segment tag as contiguous blocks (`"as":"blocks"`): a reply's size does not grow with count. */
  async getBlocks(bizTag: string, count: number, options: GetIdsOptions = {}): Promise<BlocksResult> {
    return this.get(bizTag, count, options, 'blocks');
  }

  /** Like getIds, with where the IDs came from (`pool`, `segment`, `snowflake`), as the HTTP API reports it; `'blocks'` asks for ranges. */
  async get(bizTag: string, count: number, options?: GetIdsOptions, as?: 'ids'): Promise<DispenseResult>;
  async get(bizTag: string, count: number, options: GetIdsOptions, as: 'blocks'): Promise<BlocksResult>;
  async get(bizTag: string, count: number, options: GetIdsOptions = {}, as: 'ids' | 'blocks' = 'ids'): Promise<DispenseResult | BlocksResult> {
    if (!BIZ_TAG_PATTERN.test(bizTag)) throw new BadRequestError(`invalid biz tag "${bizTag}"`, 'bizTag');
    if (!Number.isSafeInteger(count) || count < 1) throw new BadRequestError(`count must be a positive integer, got ${count}`, 'count');
    await this.start();
    return retry(
      () => traceKafkaRequest(this.settings.requestTopic, bizTag, count, () => this.request(bizTag, count, options.timeoutMs ?? this.settings.timeoutMs, as)),
      {
        what: `a Kafka ID request for "${bizTag}"`,
        retriable: (err) => err instanceof TimeoutError && !this.closing,
        attempts: (options.retries ?? this.settings.retries) + 1,
        // At once: the request already waited its timeout.
        initialMs: 0,
        onRetry: ({ attempt }) => this.logger.debug({ bizTag, attempt: attempt - 1 }, 'Kafka ID request timed out; retrying with a new request id'),
      },
    );
  }

  /** The same IDs as `bigint` (63-bit IDs exceed JS numbers). */
  async getBigIntIds(bizTag: string, count: number, options: GetIdsOptions = {}): Promise<bigint[]> {
    return (await this.getIds(bizTag, count, options)).map((id) => BigInt(id));
  }

  get inFlight(): number {
    return this.pending.size;
  }

  close(): Promise<void> {
    this.closing ??= this.doClose();
    return this.closing;
  }

  private async doStart(): Promise<void> {
    const driver = (this.driver ??= await openKafka(this.kafka, this.logger));
    const admin = (this.admin ??= driver.admin());
    await admin.connect();
    await assertTopicsExist(admin, [this.settings.requestTopic]);
    await ensureTopics(
      admin,
      [{ topic: this.replyTopic, numPartitions: 1, configs: { 'retention.ms': String(this.settings.replyRetentionMs) } }],
      this.replicationFactor,
    );
    const producer = (this.producer ??= driver.writer());
    await producer.connect();
    // A topic just created can be led in the metadata before its leader serves it ("does not
    // host this topic-partition"): join again with a fresh consumer.
    await retry(() => this.join(driver), {
      what: `joining the reply topic ${this.replyTopic}`,
      retriable: (err) => isUnknownTopic(err) && !this.closing,
      attempts: JOIN_ATTEMPTS,
      initialMs: 200,
      growth: 'linear',
      maxMs: Infinity,
      onRetry: async ({ err, attempt }) => {
        this.logger.debug({ err, attempt }, 'the new reply topic is not served yet; joining again');
        await this.dropConsumer();
      },
    });
    this.logger.debug({ replyTopic: this.replyTopic }, 'Kafka client ready');
  }

  private async join(driver: KafkaDriver): Promise<void> {
    // The topic is new and ours: reading from its start loses no reply sent before the first fetch.
    // No commits: the topic is this client's alone and lives only as long as it does.
    const consumer = (this.consumer = this.newConsumer(driver));
    await consumer.start(async (batch) => {
      for (const record of batch.records) this.onReply(record.value, record.headers);
    });
  }

  private request(bizTag: string, count: number, timeoutMs: number, as: 'ids' | 'blocks'): Promise<DispenseResult | BlocksResult> {
    const id = randomUUID();
    return new Promise<DispenseResult | BlocksResult>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new TimeoutError(`Kafka ID request ${id} for "${bizTag}"`, timeoutMs));
      }, timeoutMs);
      this.pending.set(id, { bizTag, resolve, reject, timer, span: replyWaiter() });
      const value = encodeRequest({ id, bizTag, count, replyTo: this.replyTopic, deadline: Date.now() + timeoutMs, ...(as === 'blocks' ? { as } : {}) });
      if (this.outbox.push({ id, message: withTraceHeaders<OutgoingRecord>({ key: id, value }) }) === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const batch = this.outbox;
    this.outbox = [];
    // start() made the producer before any request could be queued.
    this.producer!.send(
      this.settings.requestTopic,
      batch.map((b) => b.message),
    ).catch((err: unknown) => {
      const reason = err instanceof Error ? err.message : String(err);
      for (const { id } of batch) this.settle(id)?.reject(new IdmintError('NOT_READY', `sending the Kafka ID request failed: ${reason}`, { cause: err }));
    });
  }

  private onReply(value: Buffer | null, headers?: HeaderRecord): void {
    const reply = decodeReply(value);
    if (!reply || !this.authentic(reply)) {
      // Anyone who reads the request topic can write here: a forgery must not win the race.
      this.rejectedReplies++;
      this.forged.fail({ rejectedReplies: this.rejectedReplies }, reply ? 'not signed by the deployment' : 'malformed');
      return;
    }
    const waiter = this.settle(reply.id);
    if (!waiter) {
      this.droppedReplies++;
      return;
    }
    linkReply(waiter.span, headers);
    if ('error' in reply) waiter.reject(new IdmintError(reply.error.code, reply.error.message, { details: { requestId: reply.id } }));
    else if ('blocks' in reply)
      waiter.resolve({ bizTag: waiter.bizTag, blocks: reply.blocks.map((b) => ({ start: Number(b.start), end: Number(b.end) })), source: reply.source });
    else waiter.resolve({ bizTag: waiter.bizTag, ids: reply.ids, source: reply.source, ...(reply.format === undefined ? {} : { format: reply.format }) });
  }

  /** Whether the deployment signed this reply, for this reply topic and request id. */
  private authentic(reply: IdReply): boolean {
    const keys = this.verification.keys;
    if (!keys) return true;
    if (reply.kid === undefined || reply.sig === undefined) return false;
    const content: ReplyContent =
      'error' in reply
        ? { kind: 'error', code: reply.error.code, message: reply.error.message }
        : 'blocks' in reply
          ? { kind: 'blocks', source: reply.source, blocks: reply.blocks }
          : { kind: 'ids', source: reply.source, format: reply.format ?? '', ids: reply.ids };
    return keys.verify(reply.kid, replyBytes(this.replyTopic, reply.id, content), reply.sig);
  }

  /** Removes and returns the caller waiting on `id`: whoever settles first wins. */
  private settle(id: string): Pending | undefined {
    const waiter = this.pending.get(id);
    if (!waiter) return undefined;
    this.pending.delete(id);
    clearTimeout(waiter.timer);
    return waiter;
  }

  private async doClose(): Promise<void> {
    await this.starting?.catch(() => undefined);
    for (const id of [...this.pending.keys()]) this.settle(id)?.reject(new IdmintError('NOT_READY', 'Kafka client closed'));
    await this.dropConsumer();
    await this.producer?.close().catch(() => undefined);
    const admin = this.admin;
    if (!admin) return;
    try {
      await admin.deleteTopics([this.replyTopic]);
      await admin.deleteGroups([this.groupId]).catch(() => undefined);
    } catch (err) {
      this.logger.warn({ err, replyTopic: this.replyTopic }, 'could not delete the reply topic; its retention will empty it');
    } finally {
      await admin.close().catch(() => undefined);
    }
  }
}

export function createKafkaClient(options: KafkaClientOptions): IdmintKafkaClient {
  return new IdmintKafkaClient(options);
}
