import { BadRequestError, IdmintError, isIdmintError, notReady } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { silentLogger } from '../../core/logger.js';
import { decodePoolBlock } from '../../kafka/messages.js';
import { blockRefusal } from './block-refusal.js';
import { Episode } from '../../core/episode.js';
import { verifierFrom, type Verification } from './verification.js';
import type { Block } from '../../core/block.js';
import { openKafka, type KafkaSource } from '../../kafka/driver.js';
import type { GroupReader, ReaderBatch, ReceivedRecord, TopicAdmin } from '../../kafka/ports.js';
import { kafkaNames } from '../../kafka/names.js';
import { checkInteger, resolveOptions } from '../../core/options.js';
import type { Link } from '@opentelemetry/api';
import { blockLink, linkTake } from '../../tracing/messaging.js';

/**
 * Reads a tag's pool topic as group `idmint.pool.<tag>` (exactly one group per tag). A block's
 * offset is committed before any of its IDs is handed out (invariant 2): a crash loses the
 * rest of the block, and no other consumer can ever receive it again. Blocks stay blocks from
 * the topic to the SDK's tag buffer (`takeBlocks`); the messages of one fetch that fit the buffer
 * are committed with one request before any of them is handed out.
 */

export interface KafkaPoolConsumerSettings {
  /** Committed blocks held ready in memory; more fetches ahead, but loses more on a crash. */
  bufferBlocks: number;
  /** Default wait in take() for IDs to arrive. */
  takeTimeoutMs: number;
  /** Group session timeout: how soon a crashed consumer's partitions move to the others. */
  sessionTimeoutMs: number;
  joinTimeoutMs: number;
  /**
   * A started consumer that neither completes a fetch nor waits for room in its buffer for this
   * long is taken as wedged and replaced (the driver's watchdog: KafkaJS can stop consuming without
   * a crash or an error, tulios/kafkajs#659). Above the longest rejoin: a JoinGroup waits the
   * rebalance timeout (30 s) plus the request timeout.
   */
  stallTimeoutMs: number;
  /**
   * A block signed longer ago than this is dropped: a copy kept by whoever could read the topic is
   * useless after it. Above the pool topics' retention (a day) plus slack, and below the time Kafka
   * keeps an idle group's committed offsets (offsets.retention.minutes, 7 days by default), which
   * carry the floors that drop younger copies.
   */
  maxBlockAgeMs: number;
}

export const KAFKA_POOL_CONSUMER_DEFAULTS: Readonly<KafkaPoolConsumerSettings> = Object.freeze({
  bufferBlocks: 4,
  takeTimeoutMs: 1000,
  sessionTimeoutMs: 10_000,
  joinTimeoutMs: 30_000,
  stallTimeoutMs: 45_000,
  maxBlockAgeMs: 36 * 3_600_000,
});

/** At most this much longer than asked a take waits for the time its process could not look (a late timer). */
const MAX_WAIT_EXTENSION_MS = 30_000;

/** How long the coordinator waits for the members to rejoin in a rebalance (KafkaJS's default: 60 s). */
const REBALANCE_TIMEOUT_MS = 30_000;

export interface KafkaPoolConsumerOptions extends Partial<KafkaPoolConsumerSettings> {
  /** How to reach Kafka (`{ brokers, clientId, tls, sasl, driver }`, or a ready driver); loaded at start(). */
  kafka: KafkaSource;
  bizTag: string;
  shard?: number;
  /**
   * The deployment's public signing key(s) (`idmint keys public`; default IDMINT_VERIFY_KEY): a
   * block not signed by one of them over its place, or not above the last block taken from its
   * partition by this group, is dropped and counted (`rejected`). Required, unless insecureSkipVerify.
   */
  verifyKey?: string | readonly string[] | undefined;
  /** Serve unsigned blocks: whoever can write the pool topic then decides what this consumer hands out. Logged once. */
  insecureSkipVerify?: boolean | undefined;
  /** The servers' IDMINT_KAFKA_NAMESPACE: the pool topic is `idmint.<namespace>.ids.<tag>`. Default none: `idmint.ids.<tag>`. */
  namespace?: string | undefined;
  logger?: Logger;
}

/** What a commit's metadata says: the end of the last block this group accepted from the partition. */
const FLOOR_PREFIX = 'idmint-floor:';

interface Pending {
  next: number;
  end: number;
  /** The producer span of the block (the refill that published it), for the takes' links. */
  link: Link | undefined;
}

export class KafkaPoolConsumer {
  readonly bizTag: string;
  readonly shard: number;
  readonly topic: string;
  readonly groupId: string;
  /** Blocks dropped: unsigned, badly signed, a copy or replay, malformed, or of another tag. */
  rejectedBlocks = 0;
  /** The same, by why. */
  readonly rejected: Record<string, number> = {};
  private readonly settings: Readonly<KafkaPoolConsumerSettings>;
  private readonly verification: Verification;
  private readonly namespace: string;
  private readonly logger: Logger;
  private readonly kafka: KafkaSource;
  private reader: GroupReader | undefined;
  private admin: TopicAdmin | undefined;
  private readonly blocks: Pending[] = [];
  /**
   * Per partition, the end of the last block this group accepted there (by this member or an
   * earlier owner: it travels in the committed offset's metadata, and moves with the partition in
   * a rebalance). A block is accepted only above it: a copy or replay of one taken is dropped.
   */
  private readonly floors = new Map<number, number>();
  private readonly dropping: Episode;
  /** Partitions of the topic this member owns since the last rebalance (undefined before the first join). */
  private assigned: number | undefined;
  /** Wakes whoever waits for a block to arrive (take) or for room in the buffer (the fetch loop). */
  private waiters: Array<() => void> = [];
  private starting: Promise<void> | undefined;
  private closing: Promise<void> | undefined;
  /**
   * True once this consumer will not serve again: its start failed, or its reader failed (a crash
   * the driver does not restart from, or no fetch for stallTimeoutMs). Its takes fail NOT_READY
   * once its buffer is empty; its owner replaces it (kafkaPoolTransport does).
   */
  failed = false;

  constructor(options: KafkaPoolConsumerOptions) {
    const { kafka: _kafka, bizTag: _bizTag, shard: _shard, logger: _logger, verifyKey, insecureSkipVerify, namespace, ...rest } = options;
    if ((rest as { blockKey?: unknown }).blockKey !== undefined) {
      throw new BadRequestError(
        "Kafka pool consumer: blockKey (a shared HMAC key) is replaced by verifyKey, the deployment's public Ed25519 key (`idmint keys public`)",
        'blockKey',
      );
    }
    delete (rest as { blockKey?: unknown }).blockKey;
    this.settings = resolveOptions<KafkaPoolConsumerSettings>(KAFKA_POOL_CONSUMER_DEFAULTS, rest, (o) => {
      for (const key of Object.keys(KAFKA_POOL_CONSUMER_DEFAULTS) as (keyof KafkaPoolConsumerSettings)[]) checkInteger('Kafka pool consumer', o, key, 1);
    });
    this.verification = verifierFrom({ verifyKey, insecureSkipVerify }, 'Kafka pool consumer');
    this.namespace = namespace ?? '';
    this.bizTag = options.bizTag;
    this.shard = options.shard ?? 0;
    const names = kafkaNames(namespace);
    this.topic = names.poolTopic(options.bizTag, this.shard);
    this.groupId = names.poolGroup(options.bizTag, this.shard);
    this.logger = (options.logger ?? silentLogger).child({ component: 'kafka-pool-consumer', bizTag: options.bizTag });
    this.dropping = new Episode(this.logger, 'dropping pool blocks that must not be served (unsigned, badly signed, copies or replays)');
    this.kafka = options.kafka;
  }

  start(): Promise<void> {
    if (this.closing) return Promise.reject(new IdmintError('NOT_READY', 'Kafka pool consumer is closed'));
    this.starting ??= (async () => {
      if (!this.verification.keys)
        this.logger.warn(
          { topic: this.topic },
          'insecureSkipVerify: pool blocks are not authenticated; anyone who can write the topic decides the IDs handed out',
        );
      const driver = await openKafka(this.kafka, this.logger);
      this.admin = driver.admin();
      const { sessionTimeoutMs } = this.settings;
      this.reader = driver.reader({
        groupId: this.groupId,
        topic: this.topic,
        commit: { kind: 'manual' },
        sessionTimeoutMs,
        rebalanceTimeoutMs: Math.max(REBALANCE_TIMEOUT_MS, sessionTimeoutMs),
        heartbeatIntervalMs: Math.max(500, Math.floor(sessionTimeoutMs / 5)),
        maxWaitMs: 1000,
        joinTimeoutMs: this.settings.joinTimeoutMs,
        stallTimeoutMs: this.settings.stallTimeoutMs,
      });
      await this.reader.start((batch) => this.onBatch(batch), {
        joined: (assigned) => {
          if (assigned === 0 && this.assigned !== 0)
            this.logger.info({ topic: this.topic }, 'no partition of the pool topic for this instance (more consumers than partitions); its fallback serves');
          this.assigned = assigned;
          // Partitions may have moved: each one's floor is read again from what its last owner committed.
          this.floors.clear();
          this.wake();
        },
        failed: (err) => {
          this.logger.warn(
            { topic: this.topic, err },
            'the Kafka pool consumer stopped (a crash its driver does not restart from, or no fetch for stallTimeoutMs); a new one takes over',
          );
          this.failed = true;
          this.wake();
        },
      });
    })().catch((err: unknown) => {
      this.failed = true;
      throw isIdmintError(err) ? err : notReady('Kafka (pool consumer start)', err);
    });
    return this.starting;
  }

  /** IDs buffered and ready (already committed). */
  get buffered(): number {
    return this.blocks.reduce((n, b) => n + (b.end - b.next + 1), 0);
  }

  /** False once the group gave this instance no partition: it will get no block until a rebalance. */
  get hasPartitions(): boolean {
    return this.assigned !== 0;
  }

  /**
   * Up to `count` IDs as blocks; waits up to `timeoutMs` for blocks to arrive and returns fewer
   * (possibly none) if the topic runs dry meanwhile. When this instance owns no partition it
   * returns at once (a fallback can serve), unless `waitForPartition`: then it waits like a dry
   * topic, for a rebalance that gives it one. A caller without a fallback that retried at once
   * would spin, and a spinning process is late to the very rebalance it waits for.
   */
  async takeBlocks(count: number, options: { timeoutMs?: number; waitForPartition?: boolean } = {}): Promise<Block[]> {
    if (!Number.isSafeInteger(count) || count < 1) throw new BadRequestError(`count must be a positive integer, got ${count}`, 'count');
    await this.start();
    const timeoutMs = options.timeoutMs ?? this.settings.takeTimeoutMs;
    let deadline = Date.now() + timeoutMs;
    const latest = deadline + MAX_WAIT_EXTENSION_MS;
    const out: Block[] = [];
    let left = count;
    while (left > 0 && !this.closing) {
      const block = this.blocks[0];
      if (block) {
        // Synchronous from here to the return: two concurrent takers never see the same ID.
        const end = Math.min(block.end, block.next + left - 1);
        linkTake(block.link);
        out.push({ start: block.next, end });
        left -= end - block.next + 1;
        block.next = end + 1;
        if (block.next > block.end) {
          this.blocks.shift();
          this.wake();
        }
        continue;
      }
      if (this.failed) {
        if (out.length > 0) break;
        throw new IdmintError(
          'NOT_READY',
          `the Kafka pool consumer of "${this.bizTag}" stopped (a crash its driver does not restart from, or no fetch for stallTimeoutMs)`,
        );
      }
      // Something in hand, or nothing will come: answer now rather than wait for the rest.
      if (out.length > 0 || (this.assigned === 0 && !options.waitForPartition)) break;
      const wait = deadline - Date.now();
      if (wait <= 0) break;
      // Time this process could not look does not count against the wait. A timer that fires late
      // (the event loop held by the application's own loops, as 4 instances spinning on `await
      // next()` hold it while their buffers last) fires in the loop's timers phase, before the poll
      // phase hands over what arrived meanwhile: the take would say POOL_EMPTY for a topic that is
      // not dry. So a late timer gives the take as much again (at most its timeout), from now.
      const late = await this.waitForChange(wait);
      if (late > 0) deadline = Math.min(latest, Math.max(deadline, Date.now() + Math.min(late, timeoutMs)));
    }
    return out;
  }

  /** Up to `count` IDs as decimal strings (takeBlocks, spelled out). */
  async take(count: number, options: { timeoutMs?: number } = {}): Promise<string[]> {
    const ids: string[] = [];
    const deadline = Date.now() + (options.timeoutMs ?? this.settings.takeTimeoutMs);
    while (ids.length < count && !this.closing) {
      const blocks = await this.takeBlocks(count - ids.length, { timeoutMs: Math.max(0, deadline - Date.now()) });
      if (blocks.length === 0) break;
      for (const b of blocks) for (let id = b.start; id <= b.end; id++) ids.push(String(id));
    }
    return ids;
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.wake();
      await this.starting?.catch(() => undefined);
      await this.reader?.close();
      await this.admin?.close().catch(() => undefined);
      // Buffered IDs are dropped: their offsets are committed, so they are gaps, never repeats.
      this.blocks.length = 0;
    })();
    return this.closing;
  }

  private async onBatch(batch: ReaderBatch): Promise<void> {
    const { records, partition } = batch;
    let i = 0;
    while (i < records.length) {
      while (this.blocks.length >= this.settings.bufferBlocks) {
        if (!batch.active() || this.closing) return;
        await this.waitForChange(1000);
        await this.rejoinOnFailure(batch.heartbeat());
      }
      if (!batch.active() || this.closing) return;
      // As many as fit, judged, then committed with one request before any of them is handed out.
      const room = this.settings.bufferBlocks - this.blocks.length;
      const taken = records.slice(i, i + room);
      i += taken.length;
      const last = taken[taken.length - 1]!;
      const before = await this.floorOf(partition);
      let floor = before;
      const accepted: Pending[] = [];
      for (const record of taken) {
        const block = this.accept(record, partition, floor);
        if (!block) continue;
        accepted.push(block.pending);
        floor = block.seq;
      }
      // Commit before hand-out: if this throws or says no (rebalance, fenced member, a stopped
      // reader), none of these blocks is served here. The floor travels with the offset, so the
      // partition's next owner knows it.
      const committed = await this.rejoinOnFailure(batch.commit((BigInt(last.offset) + 1n).toString(), `${FLOOR_PREFIX}${floor}`));
      if (!committed || this.closing) return;
      if (floor > before) this.floors.set(partition, floor);
      this.blocks.push(...accepted);
      this.wake();
    }
  }

  /** A heartbeat or commit; when it fails (a rebalance), every batch waiting for room is woken to end too. */
  private async rejoinOnFailure<T>(call: Promise<T>): Promise<T> {
    try {
      return await call;
    } catch (err) {
      this.wake();
      throw err;
    }
  }

  /** The partition's floor: known since this member took it, else what its last owner committed (0 for none). */
  private async floorOf(partition: number): Promise<number> {
    const known = this.floors.get(partition);
    if (known !== undefined) return known;
    const committed = await this.admin!.committedOffsets(this.groupId, this.topic);
    const metadata = committed.find((p) => p.partition === partition)?.metadata ?? '';
    const floor = metadata.startsWith(FLOOR_PREFIX) ? Number(metadata.slice(FLOOR_PREFIX.length)) : 0;
    const value = Number.isSafeInteger(floor) && floor > 0 ? floor : 0;
    this.floors.set(partition, value);
    return value;
  }

  /** The block to serve and its sequence, or null (counted; logged once per episode) for one that must not be served. */
  private accept(message: ReceivedRecord, partition: number, floor: number): { pending: Pending; seq: number } | null {
    const block = decodePoolBlock(message.value);
    const { namespace, topic, bizTag, shard } = this;
    const why = blockRefusal(block, {
      namespace,
      topic,
      partition,
      bizTag,
      shard,
      floor,
      keys: this.verification.keys,
      maxBlockAgeMs: this.settings.maxBlockAgeMs,
    });
    if (why === undefined && block) {
      if (this.dropping.active) this.dropping.recover({ rejected: this.rejected });
      return { pending: { next: Number(block.start), end: Number(block.end), link: blockLink(message.headers) }, seq: Number(block.seq ?? block.start) };
    }
    const reason = why ?? 'malformed';
    this.rejectedBlocks++;
    this.rejected[reason] = (this.rejected[reason] ?? 0) + 1;
    this.dropping.fail({ partition, offset: message.offset, why: reason, rejected: this.rejected }, reason);
    return null;
  }

  /** Waits for a block or for room, at most `ms`; resolves with how late its timer fired (0 when woken). */
  private waitForChange(ms: number): Promise<number> {
    const due = Date.now() + ms;
    return new Promise((resolve) => {
      const done = (late: number): void => {
        clearTimeout(timer);
        // A timed-out waiter leaves the list, so an idle consumer does not grow it forever.
        this.waiters = this.waiters.filter((w) => w !== woken);
        resolve(late);
      };
      const woken = (): void => done(0);
      const timer = setTimeout(() => done(Math.max(0, Date.now() - due)), ms);
      this.waiters.push(woken);
    });
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}
