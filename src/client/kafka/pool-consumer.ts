import type { Consumer, EachBatchPayload, Kafka } from 'kafkajs';
import { BadRequestError, IdmintError, isIdmintError, notReady } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { silentLogger } from '../../core/logger.js';
import { decodePoolBlock } from '../../kafka/messages.js';
import { waitForGroupJoin } from '../../kafka/group.js';
import { poolGroup, poolTopic } from '../../kafka/topics.js';
import { checkInteger, resolveOptions } from '../../core/options.js';

/**
 * Reads a tag's pool topic as group `idmint.pool.<tag>` (exactly one group per tag). A block's
 * offset is committed before any of its IDs is handed out (invariant 2): a crash loses the
 * rest of the block, and no other consumer can ever receive it again.
 */

export interface KafkaPoolConsumerSettings {
  /** Committed blocks held ready in memory; more fetches ahead, but loses more on a crash. */
  bufferBlocks: number;
  /** Default wait in take() for IDs to arrive. */
  takeTimeoutMs: number;
  /** Group session timeout: how soon a crashed consumer's partitions move to the others. */
  sessionTimeoutMs: number;
  joinTimeoutMs: number;
}

export const KAFKA_POOL_CONSUMER_DEFAULTS: Readonly<KafkaPoolConsumerSettings> = Object.freeze({
  bufferBlocks: 1,
  takeTimeoutMs: 1000,
  sessionTimeoutMs: 10_000,
  joinTimeoutMs: 30_000,
});

export interface KafkaPoolConsumerOptions extends Partial<KafkaPoolConsumerSettings> {
  kafka: Kafka;
  bizTag: string;
  shard?: number;
  logger?: Logger;
}

interface Block {
  next: bigint;
  end: bigint;
}

export class KafkaPoolConsumer {
  readonly bizTag: string;
  readonly topic: string;
  readonly groupId: string;
  private readonly settings: Readonly<KafkaPoolConsumerSettings>;
  private readonly logger: Logger;
  private readonly consumer: Consumer;
  private readonly blocks: Block[] = [];
  /** Wakes whoever waits for a block to arrive (take) or for room in the buffer (the fetch loop). */
  private waiters: Array<() => void> = [];
  private starting: Promise<void> | undefined;
  private closing: Promise<void> | undefined;

  constructor(options: KafkaPoolConsumerOptions) {
    const { kafka: _kafka, bizTag: _bizTag, shard: _shard, logger: _logger, ...rest } = options;
    this.settings = resolveOptions<KafkaPoolConsumerSettings>(KAFKA_POOL_CONSUMER_DEFAULTS, rest, (o) => {
      for (const key of Object.keys(KAFKA_POOL_CONSUMER_DEFAULTS) as (keyof KafkaPoolConsumerSettings)[]) checkInteger('Kafka pool consumer', o, key, 1);
    });
    this.bizTag = options.bizTag;
    this.topic = poolTopic(options.bizTag, options.shard ?? 0);
    this.groupId = poolGroup(options.bizTag, options.shard ?? 0);
    this.logger = (options.logger ?? silentLogger).child({ component: 'kafka-pool-consumer', bizTag: options.bizTag });
    this.consumer = options.kafka.consumer({
      groupId: this.groupId,
      allowAutoTopicCreation: false,
      sessionTimeout: this.settings.sessionTimeoutMs,
      heartbeatInterval: Math.max(500, Math.floor(this.settings.sessionTimeoutMs / 5)),
      maxWaitTimeInMs: 1000,
    });
  }

  start(): Promise<void> {
    if (this.closing) return Promise.reject(new IdmintError('NOT_READY', 'Kafka pool consumer is closed'));
    this.starting ??= (async () => {
      const joined = waitForGroupJoin(this.consumer, this.settings.joinTimeoutMs);
      await this.consumer.connect();
      await this.consumer.subscribe({ topic: this.topic, fromBeginning: true });
      await this.consumer.run({ autoCommit: false, eachBatchAutoResolve: false, eachBatch: (p) => this.onBatch(p) });
      await joined;
    })().catch((err: unknown) => {
      throw isIdmintError(err) ? err : notReady('Kafka (pool consumer start)', err);
    });
    return this.starting;
  }

  /** IDs buffered and ready (already committed). */
  get buffered(): number {
    return this.blocks.reduce((n, b) => n + Number(b.end - b.next + 1n), 0);
  }

  /**
   * Up to `count` IDs as decimal strings; waits up to `timeoutMs` for blocks to arrive and
   * returns fewer (possibly none) if the topic runs dry meanwhile.
   */
  async take(count: number, options: { timeoutMs?: number } = {}): Promise<string[]> {
    if (!Number.isSafeInteger(count) || count < 1) throw new BadRequestError(`count must be a positive integer, got ${count}`, 'count');
    await this.start();
    const deadline = Date.now() + (options.timeoutMs ?? this.settings.takeTimeoutMs);
    const ids: string[] = [];
    while (ids.length < count && !this.closing) {
      const block = this.blocks[0];
      if (block) {
        // Synchronous from here to the push: two concurrent takers never see the same ID.
        while (ids.length < count && block.next <= block.end) ids.push(String(block.next++));
        if (block.next > block.end) {
          this.blocks.shift();
          this.wake();
        }
        continue;
      }
      const left = deadline - Date.now();
      if (left <= 0) break;
      await this.waitForChange(left);
    }
    return ids;
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.wake();
      await this.starting?.catch(() => undefined);
      await this.consumer.disconnect();
      // Buffered IDs are dropped: their offsets are committed, so they are gaps, never repeats.
      this.blocks.length = 0;
    })();
    return this.closing;
  }

  private async onBatch({ batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload): Promise<void> {
    for (const message of batch.messages) {
      while (this.blocks.length >= this.settings.bufferBlocks) {
        if (!isRunning() || isStale() || this.closing) return;
        await this.waitForChange(1000);
        await heartbeat();
      }
      if (!isRunning() || isStale() || this.closing) return;
      const next = (BigInt(message.offset) + 1n).toString();
      // Commit before hand-out: if this throws (rebalance, fenced member), the block is not served here.
      await this.consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: next }]);
      resolveOffset(message.offset);
      const block = decodePoolBlock(message.value);
      if (!block || block.bizTag !== this.bizTag) {
        this.logger.warn({ partition: batch.partition, offset: message.offset }, 'skipping a malformed pool block');
        continue;
      }
      this.blocks.push({ next: BigInt(block.start), end: BigInt(block.end) });
      this.wake();
    }
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
