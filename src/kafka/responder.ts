import { Registry } from 'prom-client';
import type { Clock, IdDispenser } from '../core/ports.js';
import { systemClock } from '../core/ports.js';
import { IdmintError, isIdmintError, notReady } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { silentLogger } from '../core/logger.js';
import { sleep } from '../core/retry.js';
import { decodeRequest, encodeBlocksReply, encodeErrorReply, encodeIdsReply } from './messages.js';
import { responderMetrics } from './metrics.js';
import type { ResponderMetrics } from './metrics.js';
import { openKafka, type KafkaSource } from './driver.js';
import type { GroupReader, OutgoingRecord, ReaderBatch, ReceivedRecord, TopicAdmin, TopicWriter } from './ports.js';
import { assertTopicsExist } from './topics.js';
import { REPLY_PREFIX, REQUEST_TOPIC, RESPONDER_GROUP } from './names.js';
import { replyBytes, type SigningKey } from './signing.js';
import { Episode } from '../core/episode.js';
import { ReplyTopics } from './reply-topics.js';
import { checkInteger, OptionsError, resolveOptions } from '../core/options.js';
import { traceKafkaProcess } from '../tracing/messaging.js';

/**
 * The responder: reads `idmint.requests`, serves each from the dispenser, replies on the
 * request's `replyTo` keyed by its id. Offsets are committed after the replies are sent, so
 * a crash redelivers a request and it gets fresh IDs; the client keeps the first reply only.
 */

export interface ResponderSettings {
  groupId: string;
  requestTopic: string;
  /** What every reply topic a request may name starts with (`idmint[.<namespace>].replies.`). */
  replyPrefix: string;
  maxCount: number;
  maxBlockCount: number;
  maxRequestBytes: number;
  concurrency: number;
  joinTimeoutMs: number;
  sessionTimeoutMs: number;
  partitionsConsumedConcurrently: number;
  commitIntervalMs: number;
}

/** How long a reply topic not listed waits for a second listing before its requests are skipped. */
const SECOND_LOOK_MS = 1000;

/** How long the coordinator waits for the members to rejoin in a rebalance (KafkaJS's default, kept). */
const REBALANCE_TIMEOUT_MS = 60_000;

export const RESPONDER_DEFAULTS: Readonly<ResponderSettings> = Object.freeze({
  /** Consumer group shared by all responders. */
  groupId: RESPONDER_GROUP,
  /** Request topic; tests use their own. */
  requestTopic: REQUEST_TOPIC,
  /** Replies go only to topics under it. */
  replyPrefix: REPLY_PREFIX,
  /** Largest accepted `count` (config IDMINT_MAX_COUNT). */
  maxCount: 10_000,
  /** Largest accepted `count` of an `"as":"blocks"` request (config IDMINT_MAX_BLOCK_COUNT). */
  maxBlockCount: 10_000_000,
  /** Largest accepted request message, bytes; a valid request is ~200. */
  maxRequestBytes: 4096,
  /** Requests served at once within a batch. */
  concurrency: 64,
  /** Longest wait for the consumer to join its group in start(). */
  joinTimeoutMs: 30_000,
  /** Group session timeout: how long a crashed responder's partitions wait before moving (and the group after Kafka restarts). */
  sessionTimeoutMs: 10_000,
  /** Request-topic partitions served at once (each batch also runs `concurrency` requests at once). */
  partitionsConsumedConcurrently: 4,
  /** Offsets are committed at most this often: a crash redelivers at most this much, and clients drop second replies. */
  commitIntervalMs: 1000,
});

export interface ResponderOptions extends Partial<ResponderSettings> {
  /** The brokers (or a ready driver); the driver is loaded at start(). */
  kafka: KafkaSource;
  dispenser: IdDispenser;
  /**
   * The deployment's signing key, read at each reply (a rotation lands without a restart);
   * undefined while this process may not sign (its key differs from the deployment record): it
   * then answers nothing, and the clients' other responders do.
   */
  signer: () => SigningKey | undefined;
  logger?: Logger;
  registry?: Registry;
  clock?: Clock;
}

export interface Responder {
  start(): Promise<void>;
  close(): Promise<void>;
  /** For /readyz: its group joined and fetching (the request topic's consumer), else why not. */
  health(): { ok: boolean; message?: string };
  readonly metrics: ResponderMetrics;
}

type Settings = Readonly<ResponderSettings>;

function validate(options: ResponderOptions): Settings {
  const keys = Object.keys(RESPONDER_DEFAULTS) as (keyof ResponderSettings)[];
  const given = Object.fromEntries(keys.map((key) => [key, options[key]])) as Partial<ResponderSettings>;
  return resolveOptions<ResponderSettings>(RESPONDER_DEFAULTS, given, (s) => {
    for (const key of [
      'maxCount',
      'maxBlockCount',
      'maxRequestBytes',
      'concurrency',
      'joinTimeoutMs',
      'sessionTimeoutMs',
      'partitionsConsumedConcurrently',
      'commitIntervalMs',
    ] as const) {
      checkInteger('responder', s, key, 1);
    }
    if (!s.groupId) throw new OptionsError('responder', 'groupId', 'must be non-empty');
    if (!s.requestTopic) throw new OptionsError('responder', 'requestTopic', 'must be non-empty');
    if (!s.replyPrefix.endsWith('.')) throw new OptionsError('responder', 'replyPrefix', 'must end with "."');
  });
}

interface Reply {
  topic: string;
  message: OutgoingRecord;
  outcome: 'ok' | 'error';
  receivedAt: number;
}

export function createResponder(options: ResponderOptions): Responder {
  return new KafkaResponder(options);
}

class KafkaResponder implements Responder {
  readonly metrics: ResponderMetrics;
  private readonly settings: Settings;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private producer: TopicWriter | undefined;
  private admin: TopicAdmin | undefined;
  private consumer: GroupReader | undefined;
  private starting: Promise<void> | undefined;
  private closing: Promise<void> | undefined;
  private replyTopics: ReplyTopics | undefined;
  private readonly unsigned: Episode;

  constructor(private readonly options: ResponderOptions) {
    this.settings = validate(options);
    this.logger = (options.logger ?? silentLogger).child({ component: 'responder' });
    this.unsigned = new Episode(this.logger, 'replies cannot be signed');
    this.clock = options.clock ?? systemClock;
    this.metrics = responderMetrics(options.registry ?? new Registry());
  }

  start(): Promise<void> {
    if (this.closing) return Promise.reject(new IdmintError('NOT_READY', 'responder is closed'));
    // A broker that cannot be reached is NOT_READY, like every other backing server.
    this.starting ??= this.doStart().catch((err: unknown) => {
      throw isIdmintError(err) ? err : notReady('Kafka (responder start)', err, 'kafka');
    });
    return this.starting;
  }

  health(): { ok: boolean; message?: string } {
    if (!this.consumer) return { ok: false, message: 'the Kafka responder has not joined its group yet' };
    const reader = this.consumer.health();
    return reader.ok ? reader : { ok: false, message: `the Kafka responder answers no request: ${reader.message ?? 'its consumer is not serving'}` };
  }

  close(): Promise<void> {
    this.closing ??= this.doClose();
    return this.closing;
  }

  private async doStart(): Promise<void> {
    const { requestTopic, groupId } = this.settings;
    const driver = await openKafka(this.options.kafka, this.logger);
    const admin = (this.admin = driver.admin());
    this.replyTopics = new ReplyTopics(admin, this.logger);
    await admin.connect();
    await assertTopicsExist(admin, [requestTopic]);
    const producer = (this.producer = driver.writer());
    await producer.connect();
    const consumer = (this.consumer = driver.reader({
      groupId,
      topic: requestTopic,
      commit: { kind: 'interval', intervalMs: this.settings.commitIntervalMs },
      sessionTimeoutMs: this.settings.sessionTimeoutMs,
      rebalanceTimeoutMs: REBALANCE_TIMEOUT_MS,
      heartbeatIntervalMs: Math.max(500, Math.floor(this.settings.sessionTimeoutMs / 10)),
      partitionsConcurrently: this.settings.partitionsConsumedConcurrently,
      joinTimeoutMs: this.settings.joinTimeoutMs,
    }));
    await consumer.start((batch) => this.onBatch(batch));
    this.logger.info({ requestTopic, groupId }, 'responder serving');
  }

  private async doClose(): Promise<void> {
    await this.starting?.catch(() => undefined);
    await this.consumer?.close().catch((err: unknown) => this.logger.warn({ err }, 'consumer disconnect failed'));
    await this.producer?.close().catch((err: unknown) => this.logger.warn({ err }, 'producer disconnect failed'));
    await this.admin?.close().catch(() => undefined);
    this.logger.info('responder closed');
  }

  /** Offsets marked done are committed by the reader at most every commitIntervalMs, and after each batch. */
  private async onBatch(batch: ReaderBatch): Promise<void> {
    const { concurrency } = this.settings;
    for (let i = 0; i < batch.records.length; i += concurrency) {
      if (!batch.active()) return;
      const chunk = batch.records.slice(i, i + concurrency);
      const replies = await Promise.all(chunk.map((m) => traceKafkaProcess(batch.topic, m, batch.partition, this.settings.groupId, () => this.serve(m))));
      await this.sendReplies(replies.filter((r): r is Reply => r !== null));
      for (const m of chunk) batch.markDone(m.offset);
      await batch.heartbeat();
    }
  }

  /** Never throws: every message ends as a reply, a drop, or a log line. */
  private async serve(message: ReceivedRecord): Promise<Reply | null> {
    const receivedAt = performance.now();
    const decoded = decodeRequest(message.value, {
      maxCount: this.settings.maxCount,
      maxBlockCount: this.settings.maxBlockCount,
      maxBytes: this.settings.maxRequestBytes,
      replyPrefix: this.settings.replyPrefix,
    });
    if (!decoded.ok) {
      if (decoded.replyTo === undefined) {
        this.metrics.requests.inc({ outcome: 'unanswerable' });
        this.logger.warn({ offset: message.offset, reason: decoded.error.message }, 'skipping a request with no readable replyTo');
        return null;
      }
      return this.errorReply(decoded.replyTo, decoded.id ?? '', decoded.error, receivedAt);
    }
    const { id, bizTag, count, replyTo, deadline, as } = decoded.request;
    if (this.clock.now() > deadline) {
      this.metrics.requests.inc({ outcome: 'expired' });
      this.logger.debug({ id, bizTag, deadline }, 'dropping a request past its deadline');
      return null;
    }
    // Checked before any ID is taken: a reply this process cannot sign would waste them.
    const key = this.signingKey(id);
    if (!key) return null;
    try {
      if (as === 'blocks') {
        if (!this.options.dispenser.getBlocks) throw new IdmintError('BAD_REQUEST', 'this responder does not answer blocks');
        const result = await this.options.dispenser.getBlocks(bizTag, count, { deadline });
        this.metrics.ids.inc(count);
        const blocks = result.blocks.map((b) => ({ start: String(b.start), end: String(b.end) }));
        const signature = { kid: key.kid, sig: key.sign(replyBytes(replyTo, id, { kind: 'blocks', source: result.source, blocks })) };
        return { topic: replyTo, message: { key: id, value: encodeBlocksReply(id, result.blocks, result.source, signature) }, outcome: 'ok', receivedAt };
      }
      const result = await this.options.dispenser.get(bizTag, count, { deadline });
      this.metrics.ids.inc(result.ids.length);
      const signature = {
        kid: key.kid,
        sig: key.sign(replyBytes(replyTo, id, { kind: 'ids', source: result.source, format: result.format ?? '', ids: result.ids })),
      };
      return {
        topic: replyTo,
        message: { key: id, value: encodeIdsReply(id, result.ids, result.source, result.format, signature) },
        outcome: 'ok',
        receivedAt,
      };
    } catch (err) {
      return this.errorReply(replyTo, id, err, receivedAt);
    }
  }

  /** The key to sign with, or undefined (logged once per episode) while this process may not sign. */
  private signingKey(id: string): SigningKey | undefined {
    const key = this.options.signer();
    if (key) {
      this.unsigned.recover();
      return key;
    }
    this.metrics.requests.inc({ outcome: 'unanswerable' });
    this.unsigned.fail({ id }, 'this responder has no signing key the deployment accepts (see /readyz): requests are left to the other responders');
    return undefined;
  }

  private errorReply(replyTo: string, id: string, err: unknown, receivedAt: number): Reply | null {
    const error = isIdmintError(err) ? err : new IdmintError('NOT_READY', 'the dispenser failed unexpectedly', { cause: err });
    if (!isIdmintError(err)) this.logger.error({ err, id }, 'dispenser failed');
    const key = this.signingKey(id);
    if (!key) return null;
    this.metrics.errors.inc({ code: error.code });
    const signature = { kid: key.kid, sig: key.sign(replyBytes(replyTo, id, { kind: 'error', code: error.code, message: error.message })) };
    return { topic: replyTo, message: { key: id, value: encodeErrorReply(id, error.code, error.message, signature) }, outcome: 'error', receivedAt };
  }

  private async sendReplies(replies: Reply[]): Promise<void> {
    const byTopic = new Map<string, Reply[]>();
    for (const r of replies) byTopic.set(r.topic, [...(byTopic.get(r.topic) ?? []), r]);
    await Promise.all(
      [...byTopic].map(async ([topic, group]) => {
        try {
          if (!(await this.replyTopics!.exists(topic, group[0]!.receivedAt))) {
            // On several brokers a reply topic created a moment ago may not be listed yet by the
            // broker asked: look once more a second later, without holding up this batch.
            void this.secondLook(topic, group);
            return;
          }
          await this.send(topic, group);
        } catch (err) {
          this.failed(topic, group, err);
        }
      }),
    );
  }

  private async secondLook(topic: string, group: Reply[]): Promise<void> {
    await sleep(SECOND_LOOK_MS);
    try {
      if (await this.replyTopics!.exists(topic, performance.now())) {
        await this.send(topic, group);
        return;
      }
      this.metrics.requests.inc({ outcome: 'unanswerable' }, group.length);
      this.logger.warn({ topic, requests: group.length }, 'reply topic does not exist; requests skipped');
    } catch (err) {
      this.failed(topic, group, err);
    }
  }

  private async send(topic: string, group: Reply[]): Promise<void> {
    await this.producer!.send(
      topic,
      group.map((r) => r.message),
    );
    const now = performance.now();
    for (const r of group) {
      this.metrics.requests.inc({ outcome: r.outcome });
      this.metrics.latency.observe({ outcome: r.outcome }, (now - r.receivedAt) / 1000);
    }
  }

  private failed(topic: string, group: Reply[], err: unknown): void {
    this.replyTopics?.forget(topic);
    this.metrics.requests.inc({ outcome: 'unanswerable' }, group.length);
    this.logger.warn({ err, topic, requests: group.length }, 'sending replies failed; the clients will time out and retry');
  }
}
