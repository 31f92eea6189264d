import type { Consumer, EachBatchPayload, Kafka } from 'kafkajs';
import type { GroupReader, GroupReaderEvents, GroupReaderOptions, ReaderBatch } from '../ports.js';
import { installFetchGuard } from './fetch-guard.js';
import { waitForGroupJoin } from './group.js';

/** KafkaJS's errors after which a member must rejoin its group (its isRebalancing, and an unknown member). */
const REJOIN_TYPES = new Set(['REBALANCE_IN_PROGRESS', 'NOT_COORDINATOR_FOR_GROUP', 'ILLEGAL_GENERATION', 'UNKNOWN_MEMBER_ID']);

/** The rebalance error in `err` (itself, or the cause KafkaJS wrapped after its retries), else undefined. */
export function rebalanceError(err: unknown): Error | undefined {
  for (let e = err as { type?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 4; e = e.cause as typeof e, depth++) {
    if (typeof e.type === 'string' && REJOIN_TYPES.has(e.type)) return e as unknown as Error;
  }
  return undefined;
}

/** KafkaJS's default wait of a fetch for records. */
const DEFAULT_MAX_WAIT_MS = 5000;

/** A consumer that completed no fetch for this long is not fetching: three of its waits, 15 s at least. */
export function fetchWindowMs(maxWaitMs: number | undefined): number {
  return Math.max(15_000, 3 * (maxWaitMs ?? DEFAULT_MAX_WAIT_MS));
}

/** Raised through `failed` when the watchdog finds the consumer wedged. */
export class StalledReaderError extends Error {
  constructor(readonly silentMs: number) {
    super(`the Kafka consumer completed no fetch for ${silentMs} ms (KafkaJS wedged)`);
    this.name = 'IdmintStalledReader';
  }
}

/**
 * The GroupReader port over a KafkaJS consumer, with what KafkaJS 2.2.4 needs worked around:
 * the fetch guard (a fetch loop that never yields), a watchdog for a consumer that stops without
 * a crash (tulios/kafkajs#659), rebalance errors unwrapped so KafkaJS rejoins at once, and a
 * commit checked afterwards (commitOffsets returns without committing once the consumer stopped).
 */
export class KafkaJsGroupReader implements GroupReader {
  failed = false;
  private readonly consumer: Consumer;
  /**
   * Set when a commit or heartbeat met a rebalance (the coordinator moved, the member was
   * evicted): every batch in hand ends at once, so KafkaJS's fetchers end and it rejoins.
   * Cleared when the rebalance starts, and by the join.
   */
  private rejoining = false;
  private lastProgress = Date.now();
  private watchdog: NodeJS.Timeout | undefined;
  private events: GroupReaderEvents = {};
  private closed = false;
  /** Partitions of the topic held since the last join (undefined before the first). */
  private assigned: number | undefined;
  /** Joined and not rebalancing or crashed since (health). */
  private joined = false;
  private lastFetch = 0;
  /** Why it is not joined, when a crash said so. */
  private trouble: string | undefined;

  constructor(
    kafka: Kafka,
    private readonly options: GroupReaderOptions,
  ) {
    installFetchGuard(); // `kafka` may be the caller's own KafkaJS instance
    this.consumer = kafka.consumer({
      groupId: options.groupId,
      allowAutoTopicCreation: false,
      sessionTimeout: options.sessionTimeoutMs,
      rebalanceTimeout: options.rebalanceTimeoutMs ?? options.sessionTimeoutMs,
      heartbeatInterval: options.heartbeatIntervalMs,
      ...(options.maxWaitMs === undefined ? {} : { maxWaitTimeInMs: options.maxWaitMs }),
    });
    const alive = (): void => {
      this.lastProgress = Date.now();
    };
    this.consumer.on(this.consumer.events.GROUP_JOIN, (event) => {
      this.rejoining = false;
      this.joined = true;
      this.trouble = undefined;
      this.lastFetch = Date.now();
      alive();
      this.assigned = event.payload.memberAssignment[options.topic]?.length ?? 0;
      this.events.joined?.(this.assigned);
    });
    this.consumer.on(this.consumer.events.FETCH, () => {
      this.lastFetch = Date.now();
      alive();
    });
    this.consumer.on(this.consumer.events.START_BATCH_PROCESS, alive);
    // KafkaJS emits it once every fetcher has ended, so the batches told to end are done.
    this.consumer.on(this.consumer.events.REBALANCING, () => {
      this.rejoining = false;
      this.joined = false;
      this.trouble = 'its group is rebalancing';
      alive();
      this.events.rebalancing?.();
    });
    this.consumer.on(this.consumer.events.CRASH, (event) => {
      this.joined = false;
      this.trouble = event.payload.error?.message;
      if (event.payload.restart) return;
      this.fail(event.payload.error);
    });
  }

  async start(onBatch: (batch: ReaderBatch) => Promise<void>, events: GroupReaderEvents = {}): Promise<void> {
    this.events = events;
    const { commit, topic } = this.options;
    const joined = waitForGroupJoin(this.consumer, this.options.joinTimeoutMs);
    try {
      await this.consumer.connect();
      // A new group starts at the beginning: nothing sent before it joined is missed.
      await this.consumer.subscribe({ topic, fromBeginning: true });
      await this.consumer.run({
        autoCommit: commit.kind === 'interval',
        ...(commit.kind === 'interval' ? { autoCommitInterval: commit.intervalMs } : {}),
        eachBatchAutoResolve: commit.kind === 'none',
        partitionsConsumedConcurrently: this.options.partitionsConcurrently ?? 1,
        eachBatch: (payload) => onBatch(this.batchOf(payload)),
      });
      await joined;
    } catch (err) {
      this.failed = true;
      throw err;
    }
    this.lastProgress = Date.now();
    const stall = this.options.stallTimeoutMs;
    if (stall !== undefined) this.watchdog = setInterval(() => this.checkStalled(stall), Math.min(5000, stall)).unref();
  }

  health(): { ok: boolean; message?: string } {
    const { groupId, topic } = this.options;
    if (this.closed) return { ok: false, message: `the consumer of ${topic} is closed` };
    if (this.failed) return { ok: false, message: `the consumer of ${topic} stopped for good; it is being replaced` };
    if (!this.joined) return { ok: false, message: `not joined to group ${groupId}${this.trouble ? `: ${this.trouble}` : ''}` };
    const silentMs = Date.now() - this.lastFetch;
    if (silentMs > fetchWindowMs(this.options.maxWaitMs))
      return { ok: false, message: `no fetch from ${topic} completed for ${Math.round(silentMs / 1000)} s` };
    return { ok: true };
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.watchdog);
    await this.consumer.disconnect();
  }

  private batchOf(payload: EachBatchPayload): ReaderBatch {
    const { batch, resolveOffset, heartbeat, isRunning, isStale } = payload;
    const active = (): boolean => isRunning() && !isStale() && !this.rejoining && !this.closed;
    return {
      topic: batch.topic,
      partition: batch.partition,
      records: batch.messages.map((m) => ({ offset: m.offset, key: m.key ?? null, value: m.value, ...(m.headers ? { headers: m.headers } : {}) })),
      active,
      heartbeat: async () => {
        // Waiting for room is no stall: nothing is fetched while the handler holds the batch.
        this.lastProgress = Date.now();
        await this.groupCall(heartbeat);
      },
      markDone: (offset) => resolveOffset(offset),
      commit: async (nextOffset, metadata) => {
        await this.groupCall(() => this.consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: nextOffset, metadata }]));
        // KafkaJS's commitOffsets returns without committing, and without an error, once the
        // consumer stopped running (a stop, a crash it restarts from): treat it as not committed.
        if (!isRunning() || this.closed) return false;
        for (const m of batch.messages) if (BigInt(m.offset) < BigInt(nextOffset)) resolveOffset(m.offset);
        return true;
      },
    };
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
      throw bare;
    }
  }

  private checkStalled(stallMs: number): void {
    // A member without partitions fetches nothing: silence is expected there.
    if (this.closed || this.failed || this.assigned === 0) return;
    const silent = Date.now() - this.lastProgress;
    if (silent >= stallMs) this.fail(new StalledReaderError(silent));
  }

  private fail(err: unknown): void {
    if (this.failed) return;
    this.failed = true;
    clearInterval(this.watchdog);
    this.events.failed?.(err);
  }
}
