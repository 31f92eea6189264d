import type { Consumer, EachBatchPayload, Kafka } from 'kafkajs';
import { BadRequestError, IdmintError, isIdmintError, notReady } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { silentLogger } from '../../core/logger.js';
import { decodePoolBlock } from '../../kafka/messages.js';
import { verifyPoolBlock } from '../../kafka/block-signature.js';
import type { Block } from '../../core/block.js';
import { waitForGroupJoin } from '../../kafka/group.js';
import { installFetchGuard } from '../../kafka/fetch-guard.js';
import { kafkaNames } from '../../kafka/topics.js';
import { checkInteger, resolveOptions } from '../../core/options.js';

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
   * long is taken as wedged and replaced (KafkaJS can stop consuming without a crash or an error,
   * tulios/kafkajs#659). Above the longest rejoin: a JoinGroup waits the rebalance timeout (30 s)
   * plus the request timeout.
   */
  stallTimeoutMs: number;
}

export const KAFKA_POOL_CONSUMER_DEFAULTS: Readonly<KafkaPoolConsumerSettings> = Object.freeze({
  bufferBlocks: 4,
  takeTimeoutMs: 1000,
  sessionTimeoutMs: 10_000,
  joinTimeoutMs: 30_000,
  stallTimeoutMs: 45_000,
});

/** How long the coordinator waits for the members to rejoin in a rebalance (KafkaJS: 60 s). */
const REBALANCE_TIMEOUT_MS = 30_000;

export interface KafkaPoolConsumerOptions extends Partial<KafkaPoolConsumerSettings> {
  kafka: Kafka;
  bizTag: string;
  shard?: number;
  /**
   * The key the refill signs blocks with (its IDMINT_POOL_BLOCK_KEY): unsigned and badly signed
   * blocks are dropped and counted (`rejectedBlocks`). Without it every well-formed block is
   * served, and whoever can write the pool topic decides what this consumer hands out.
   */
  blockKey?: string | undefined;
  /** The servers' IDMINT_KAFKA_NAMESPACE: the pool topic is `idmint.<namespace>.ids.<tag>`. Default none: `idmint.ids.<tag>`. */
  namespace?: string | undefined;
  logger?: Logger;
}

/** KafkaJS's errors after which a member must rejoin its group (its isRebalancing, and an unknown member). */
const REJOIN_TYPES = new Set(['REBALANCE_IN_PROGRESS', 'NOT_COORDINATOR_FOR_GROUP', 'ILLEGAL_GENERATION', 'UNKNOWN_MEMBER_ID']);

/** The rebalance error in `err` (itself, or the cause KafkaJS wrapped after its retries), else undefined. */
export function rebalanceError(err: unknown): Error | undefined {
  for (let e = err as { type?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 4; e = e.cause as typeof e, depth++) {
    if (typeof e.type === 'string' && REJOIN_TYPES.has(e.type)) return e as unknown as Error;
  }
  return undefined;
}

/** Block starts remembered per partition to drop a copy of a block (see seenBefore). */
const REMEMBERED_BLOCKS = 1024;

interface Pending {
  next: number;
  end: number;
}

export class KafkaPoolConsumer {
  readonly bizTag: string;
  readonly shard: number;
  readonly topic: string;
  readonly groupId: string;
  /** Blocks dropped: unsigned or badly signed (with a blockKey), malformed, or of another tag. */
  rejectedBlocks = 0;
  private readonly settings: Readonly<KafkaPoolConsumerSettings>;
  private readonly blockKey: string | undefined;
  private readonly logger: Logger;
  private readonly consumer: Consumer;
  private readonly blocks: Pending[] = [];
  /** The starts of the blocks last taken from each partition (REMEMBERED_BLOCKS of them), to drop a copy. */
  private readonly recent = new Map<number, Set<number>>();
  /** Partitions of the topic this member owns since the last rebalance (undefined before the first join). */
  private assigned: number | undefined;
  /** Wakes whoever waits for a block to arrive (take) or for room in the buffer (the fetch loop). */
  private waiters: Array<() => void> = [];
  private starting: Promise<void> | undefined;
  private closing: Promise<void> | undefined;
  /**
   * Set when a commit or heartbeat of this member met a rebalance (the coordinator moved, the
   * member was evicted): every batch in hand returns at once, so KafkaJS's fetchers end and it
   * rejoins. Cleared when the rebalance starts, and by the join.
   */
  private rejoining = false;
  /** When the consumer last showed it is alive: a fetch completed, a join, a batch, a wait for room. */
  private lastProgress = Date.now();
  private watchdog: NodeJS.Timeout | undefined;
  /**
   * True once this consumer will not serve again: its start failed, or KafkaJS stopped it after a
   * crash it does not restart from (a non-retriable error, or the client's `restartOnFailure`
   * said no) — KafkaJS then leaves it disconnected and silent. Its takes fail NOT_READY once its
   * buffer is empty; its owner replaces it (kafkaPoolTransport does).
   */
  failed = false;

  constructor(options: KafkaPoolConsumerOptions) {
    const { kafka: _kafka, bizTag: _bizTag, shard: _shard, logger: _logger, blockKey, namespace, ...rest } = options;
    this.settings = resolveOptions<KafkaPoolConsumerSettings>(KAFKA_POOL_CONSUMER_DEFAULTS, rest, (o) => {
      for (const key of Object.keys(KAFKA_POOL_CONSUMER_DEFAULTS) as (keyof KafkaPoolConsumerSettings)[]) checkInteger('Kafka pool consumer', o, key, 1);
    });
    if (blockKey !== undefined && blockKey.length < 16) throw new BadRequestError('Kafka pool consumer: blockKey must be at least 16 characters', 'blockKey');
    this.blockKey = blockKey;
    this.bizTag = options.bizTag;
    this.shard = options.shard ?? 0;
    const names = kafkaNames(namespace);
    this.topic = names.poolTopic(options.bizTag, this.shard);
    this.groupId = names.poolGroup(options.bizTag, this.shard);
    this.logger = (options.logger ?? silentLogger).child({ component: 'kafka-pool-consumer', bizTag: options.bizTag });
    installFetchGuard(); // options.kafka may be the caller's own KafkaJS instance
    this.consumer = options.kafka.consumer({
      groupId: this.groupId,
      allowAutoTopicCreation: false,
      sessionTimeout: this.settings.sessionTimeoutMs,
      rebalanceTimeout: Math.max(REBALANCE_TIMEOUT_MS, this.settings.sessionTimeoutMs),
      heartbeatInterval: Math.max(500, Math.floor(this.settings.sessionTimeoutMs / 5)),
      maxWaitTimeInMs: 1000,
    });
    this.consumer.on(this.consumer.events.GROUP_JOIN, (event) => {
      const assigned = event.payload.memberAssignment[this.topic]?.length ?? 0;
      if (assigned === 0 && this.assigned !== 0) this.logger.info({ topic: this.topic }, 'no partition of the pool topic for this instance (more consumers than partitions); its fallback serves');
      this.assigned = assigned;
      this.rejoining = false;
      this.lastProgress = Date.now();
      this.wake();
    });
    const alive = (): void => {
      this.lastProgress = Date.now();
    };
    this.consumer.on(this.consumer.events.FETCH, alive);
    this.consumer.on(this.consumer.events.START_BATCH_PROCESS, alive);
    // A rebalance starting: the join that follows fetches nothing for up to the rebalance timeout.
    // KafkaJS emits it once every fetcher has ended, so the batches that were told to end are done
    // (a join that then fails is retried by fetching again: batches run, and end again if need be).
    this.consumer.on(this.consumer.events.REBALANCING, () => {
      this.rejoining = false;
      alive();
    });
    this.consumer.on(this.consumer.events.CRASH, (event) => {
      if (event.payload.restart) return;
      this.logger.warn({ topic: this.topic, err: event.payload.error }, 'the Kafka pool consumer crashed and KafkaJS will not restart it; a new one takes over');
      this.failed = true;
      this.wake();
    });
  }

  start(): Promise<void> {
    if (this.closing) return Promise.reject(new IdmintError('NOT_READY', 'Kafka pool consumer is closed'));
    this.starting ??= (async () => {
      if (!this.blockKey) this.logger.warn({ topic: this.topic }, 'no blockKey: pool blocks are not authenticated; anyone who can write the topic decides the IDs handed out');
      const joined = waitForGroupJoin(this.consumer, this.settings.joinTimeoutMs);
      await this.consumer.connect();
      await this.consumer.subscribe({ topic: this.topic, fromBeginning: true });
      await this.consumer.run({ autoCommit: false, eachBatchAutoResolve: false, eachBatch: (p) => this.onBatch(p) });
      await joined;
      this.lastProgress = Date.now();
      this.watchdog = setInterval(() => this.checkStalled(), Math.min(5000, this.settings.stallTimeoutMs)).unref();
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
    const deadline = Date.now() + (options.timeoutMs ?? this.settings.takeTimeoutMs);
    const out: Block[] = [];
    let left = count;
    while (left > 0 && !this.closing) {
      const block = this.blocks[0];
      if (block) {
        // Synchronous from here to the return: two concurrent takers never see the same ID.
        const end = Math.min(block.end, block.next + left - 1);
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
        throw new IdmintError('NOT_READY', `the Kafka pool consumer of "${this.bizTag}" stopped (a crash KafkaJS does not restart, or no fetch for stallTimeoutMs)`);
      }
      // Something in hand, or nothing will come: answer now rather than wait for the rest.
      if (out.length > 0 || (this.assigned === 0 && !options.waitForPartition)) break;
      const wait = deadline - Date.now();
      if (wait <= 0) break;
      await this.waitForChange(wait);
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
      clearInterval(this.watchdog);
      this.wake();
      await this.starting?.catch(() => undefined);
      await this.consumer.disconnect();
      // Buffered IDs are dropped: their offsets are committed, so they are gaps, never repeats.
      this.blocks.length = 0;
    })();
    return this.closing;
  }

  /** Marks a consumer that showed no sign of life for stallTimeoutMs as failed: its owner replaces it. */
  private checkStalled(): void {
    // A member without partitions fetches nothing: silence is expected there.
    if (this.closing || this.failed || this.assigned === 0) return;
    const silent = Date.now() - this.lastProgress;
    if (silent < this.settings.stallTimeoutMs) return;
    this.logger.warn({ topic: this.topic, silentMs: silent }, 'the Kafka pool consumer completed no fetch for too long (KafkaJS wedged); a new one takes over');
    clearInterval(this.watchdog);
    this.failed = true;
    this.wake();
  }

  private async onBatch({ batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload): Promise<void> {
    const messages = batch.messages;
    let i = 0;
    while (i < messages.length) {
      while (this.blocks.length >= this.settings.bufferBlocks) {
        if (!isRunning() || isStale() || this.closing || this.rejoining) return;
        // Waiting for takers is no stall: nothing is fetched while the buffer is full.
        this.lastProgress = Date.now();
        await this.waitForChange(1000);
        await this.groupCall(heartbeat);
      }
      if (!isRunning() || isStale() || this.closing || this.rejoining) return;
      // As many as fit, committed with one request before any of them is handed out.
      const room = this.settings.bufferBlocks - this.blocks.length;
      const taken = messages.slice(i, i + room);
      i += taken.length;
      const last = taken[taken.length - 1]!;
      // Commit before hand-out: if this throws (rebalance, fenced member), none of these blocks is served here.
      await this.groupCall(() => this.consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: (BigInt(last.offset) + 1n).toString() }]));
      // KafkaJS's commitOffsets returns without committing, and without an error, once the
      // consumer stopped running (a stop, a crash it restarts from): those blocks may be uncommitted.
      if (!isRunning() || this.closing) return;
      for (const message of taken) {
        resolveOffset(message.offset);
        const block = this.accept(message.value, batch.partition, message.offset);
        if (block) this.blocks.push(block);
      }
      this.wake();
    }
  }

  /**
   * A commit or heartbeat; a rebalance error it meets (also as the cause of KafkaJS's "retries
   * exceeded") is thrown bare and ends every batch in hand. KafkaJS rejoins — finding the group's
   * coordinator anew — only when such an error reaches its fetch loop bare, and only once every
   * fetcher has ended: its commits keep the coordinator they cached and retry NOT_COORDINATOR there,
   * and batches waiting for room kept the fetchers alive, so a member whose coordinator had moved
   * (a hung broker) took 25–45 s to serve again, or the watchdog's 45 s.
   */
  private async groupCall(call: () => Promise<void>): Promise<void> {
    try {
      await call();
    } catch (err) {
      const bare = rebalanceError(err);
      if (!bare) throw err;
      this.rejoining = true;
      this.wake();
      throw bare;
    }
  }

  /** The block to serve, or null (logged, counted) for one that must not be served. */
  private accept(value: Buffer | null, partition: number, offset: string): Pending | null {
    const block = decodePoolBlock(value);
    let why: string | undefined;
    if (!block || block.bizTag !== this.bizTag || (block.shard ?? 0) !== this.shard) why = 'malformed, or of another tag or shard';
    else if (this.blockKey !== undefined && !verifyPoolBlock(this.blockKey, block)) why = block.sig === undefined ? 'unsigned' : 'badly signed';
    else if (!Number.isSafeInteger(Number(block.end))) why = 'beyond 2^53';
    else if (this.seenBefore(partition, Number(block.start))) why = 'a copy of a block this consumer took from this partition already';
    if (why !== undefined || !block) {
      this.rejectedBlocks++;
      // The first, then every thousandth: a producer flooding the topic does not flood the log.
      if (this.rejectedBlocks % 1000 === 1) this.logger.warn({ partition, offset, why, rejectedBlocks: this.rejectedBlocks }, 'skipping a pool block that must not be served');
      return null;
    }
    return { next: Number(block.start), end: Number(block.end) };
  }

  /**
   * Whether a block starting at `start` was taken from this partition lately; remembers it.
   * Belt and braces: the refill never appends a block twice (KafkaPoolSink, TopicProducer's
   * appendOnce), but a copy that did land in the same partition is then dropped here when the
   * same consumer reads both — a copy read by another member after a rebalance is not.
   */
  private seenBefore(partition: number, start: number): boolean {
    let starts = this.recent.get(partition);
    if (!starts) this.recent.set(partition, (starts = new Set()));
    if (starts.has(start)) return true;
    starts.add(start);
    if (starts.size > REMEMBERED_BLOCKS) starts.delete(starts.values().next().value!);
    return false;
  }

  private waitForChange(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        // A timed-out waiter leaves the list, so an idle consumer does not grow it forever.
        this.waiters = this.waiters.filter((w) => w !== done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.push(done);
    });
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}
