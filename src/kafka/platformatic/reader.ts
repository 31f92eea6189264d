import { Consumer, type GroupAssignment, type Message, type MessagesStream } from '@platformatic/kafka';
import { TimeoutError } from '../../core/errors.js';
import { Episode } from '../../core/episode.js';
import type { Logger } from '../../core/logger.js';
import { retry, sleep } from '../../core/retry.js';
import type { GroupReader, GroupReaderEvents, GroupReaderOptions, ReaderBatch, RecordHeaders } from '../ports.js';
import { type Membership, OffsetCommitter, type OffsetToCommit } from './commit.js';
import { type PlatformaticBaseOptions, protocolErrorName, typed } from './options.js';

/** The library's default wait of a fetch for records (and the KafkaJS driver's). */
const DEFAULT_MAX_WAIT_MS = 5000;
/** Records taken from the stream's buffer in one round, split into batches by partition. */
const MAX_ROUND = 10_000;
/** A stream that failed (a fetch refused, a broker gone) is replaced after this pause. */
const RESTART_PAUSE_MS = 1000;
/** How long a partition waits for the record it was rewound to. */
const REWIND_MAX_MS = 30_000;

/** A reader that completed no fetch for this long is not fetching: three of its waits, 15 s at least. */
export function fetchWindowMs(maxWaitMs: number | undefined): number {
  return Math.max(15_000, 3 * (maxWaitMs ?? DEFAULT_MAX_WAIT_MS));
}

/** Raised through `failed` when the reader neither fetched nor heard from its handler for stallTimeoutMs. */
export class StalledReaderError extends Error {
  constructor(readonly silentMs: number) {
    super(`the Kafka consumer completed no fetch for ${silentMs} ms`);
    this.name = 'IdmintStalledReader';
  }
}

/** Thrown by a batch's heartbeat (and so by its handler) once the batch must end: its group moved on. */
export class RebalancingError extends Error {
  readonly type = 'REBALANCE_IN_PROGRESS';
  constructor() {
    super('the consumer group is rebalancing: this batch ends');
    this.name = 'IdmintRebalancing';
  }
}

/** Protocol errors of a commit after which this member's batches are stale. */
const STALE_TYPES = new Set(['REBALANCE_IN_PROGRESS', 'ILLEGAL_GENERATION', 'UNKNOWN_MEMBER_ID', 'FENCED_INSTANCE_ID']);

/** Records of one round as batches: one per partition and membership they were fetched under, in order. */
export function batchesOf<T extends { partition: number; membership: Membership }>(records: readonly T[]): T[][] {
  const runs = new Map<string, T[]>();
  for (const r of records) {
    const key = `${r.partition}:${r.membership.generationId}:${r.membership.memberId}`;
    let run = runs.get(key);
    if (!run) runs.set(key, (run = []));
    run.push(r);
  }
  return [...runs.values()];
}

interface Fetched {
  partition: number;
  membership: Membership;
  message: Message;
}

/**
 * The GroupReader port over @platformatic/kafka's Consumer and its messages stream. The stream
 * fetches; this reader takes what it buffered in rounds, hands each partition's records to the
 * handler as a batch, and commits through OffsetCommitter (metadata, and fenced by the generation
 * the records were fetched under). The library heartbeats on its own timer, rejoins by itself,
 * and re-reads from the committed offsets after each join; a batch fetched under an older
 * generation ends (`active()` false) and its commit is refused.
 */
export class PlatformaticGroupReader implements GroupReader {
  failed = false;
  private readonly consumer: Consumer;
  private readonly committer: OffsetCommitter;
  private stream: MessagesStream<Buffer, Buffer, Buffer, Buffer> | undefined;
  private events: GroupReaderEvents = {};
  private closed = false;
  /** The membership of the last join and its partitions of the topic; undefined while (re)joining. */
  private membership: (Membership & { partitions: Set<number> }) | undefined;
  private lastFetch = 0;
  private lastProgress = Date.now();
  private trouble: string | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  private wakeLoop: (() => void) | undefined;
  /** Interval commits: per partition, the next offset to commit and the membership it was read under. */
  private readonly done = new Map<number, OffsetToCommit & { membership: Membership }>();
  private lastCommit = Date.now();
  private restarting: Promise<void> | undefined;
  /**
   * Per partition, the next offset not yet given to a batch under a membership: a fetch answered
   * after a join may repeat records already given under it (the stream re-reads from the committed
   * offsets), and those are skipped.
   */
  private readonly given = new Map<number, { key: string; next: bigint }>();
  /**
   * Partitions read again from an offset after a batch failed with the membership unchanged (a
   * commit refused by a restarted broker, say): the stream had read past it, and nothing would
   * read those records again before a rebalance. Until the record at `offset` comes back, the
   * partition's read-ahead records are dropped. Given up after REWIND_MAX_MS (the offset deleted).
   */
  private readonly rewinds = new Map<number, { offset: bigint; since: number }>();
  private rejoining: Promise<void> | undefined;
  /** A stream failing while Kafka cannot be reached: one warning when it starts, one when the reader serves again. */
  private readonly outage: Episode;

  constructor(
    base: PlatformaticBaseOptions,
    private readonly options: GroupReaderOptions,
    private readonly logger: Logger,
  ) {
    const maxWaitTime = options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS;
    this.consumer = new Consumer({
      ...base,
      // A fetch waits up to maxWaitTime at the broker before it answers.
      requestTimeout: base.requestTimeout + maxWaitTime,
      groupId: options.groupId,
      autocommit: false,
      maxWaitTime,
      ...this.groupOptions(),
    });
    this.committer = new OffsetCommitter(this.consumer, base);
    this.outage = new Episode(logger, 'Kafka unreachable; its clients keep retrying', { dependency: 'kafka' });
    this.consumer.on('consumer:group:join', (payload) =>
      this.onJoin(payload.generationId ?? this.consumer.generationId, payload.memberId, payload.assignments ?? []),
    );
    this.consumer.on('consumer:group:rebalance', () => {
      this.membership = undefined;
      this.trouble = 'its group is rebalancing';
      this.wakeLoop?.();
      this.events.rebalancing?.();
    });
    this.consumer.on('consumer:heartbeat:error', ({ error }) => {
      this.trouble = error.message;
    });
    this.consumer.on('consumer:heartbeat:end', () => {
      if (!this.membership) return;
      this.trouble = undefined;
      if (this.outage.active && !this.restarting) this.outage.recover({ topic: this.options.topic });
    });
    // A rejoin that failed after its retries: the library schedules no more heartbeats.
    this.consumer.on('error', (err: Error) => this.fail(typed(err)));
  }

  private groupOptions() {
    const { sessionTimeoutMs, heartbeatIntervalMs, rebalanceTimeoutMs } = this.options;
    return { sessionTimeout: sessionTimeoutMs, heartbeatInterval: heartbeatIntervalMs, rebalanceTimeout: rebalanceTimeoutMs ?? sessionTimeoutMs };
  }

  async start(onBatch: (batch: ReaderBatch) => Promise<void>, events: GroupReaderEvents = {}): Promise<void> {
    this.events = events;
    const { joinTimeoutMs } = this.options;
    let timer: NodeJS.Timeout | undefined;
    // At the deadline, what the joins met (Kafka unreachable: NOT_READY to the caller), else a timeout.
    let lastFailure: unknown;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(lastFailure ?? new TimeoutError('joining the Kafka consumer group', joinTimeoutMs)), joinTimeoutMs);
    });
    try {
      this.attach(await Promise.race([this.consume(joinTimeoutMs, (err) => (lastFailure = err)), timeout]));
    } catch (err) {
      this.failed = true;
      await this.shut();
      throw typed(err);
    } finally {
      clearTimeout(timer);
    }
    this.lastProgress = Date.now();
    const stall = this.options.stallTimeoutMs;
    if (stall !== undefined) this.watchdog = setInterval(() => this.checkStalled(stall), Math.min(5000, stall)).unref();
    void this.loop(onBatch);
  }

  health(): { ok: boolean; message?: string } {
    const { groupId, topic } = this.options;
    if (this.closed) return { ok: false, message: `the consumer of ${topic} is closed` };
    if (this.failed) return { ok: false, message: `the consumer of ${topic} stopped for good; it is being replaced` };
    if (!this.membership) return { ok: false, message: `not joined to group ${groupId}${this.trouble ? `: ${this.trouble}` : ''}` };
    const silentMs = Date.now() - this.lastFetch;
    if (silentMs > fetchWindowMs(this.options.maxWaitMs))
      return { ok: false, message: `no fetch from ${topic} completed for ${Math.round(silentMs / 1000)} s` };
    return { ok: true };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.watchdog);
    this.wakeLoop?.();
    await this.restarting?.catch(() => undefined);
    await this.commitDone().catch(() => undefined);
    await this.shut();
  }

  private async shut(): Promise<void> {
    await this.stream?.close().catch(() => undefined);
    await this.consumer.close(true).catch(() => undefined);
    await this.committer.close().catch(() => undefined);
  }

  /** Joins (asking again while the coordinator loads or moves) and opens the stream, from the committed offsets or the beginning. */
  private consume(timeoutMs: number, failed?: (err: unknown) => void): Promise<MessagesStream<Buffer, Buffer, Buffer, Buffer>> {
    return retry(
      () =>
        this.consumer.consume({
          topics: [this.options.topic],
          mode: 'committed',
          fallbackMode: 'earliest',
          autocommit: false,
          maxWaitTime: this.options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS,
          ...this.groupOptions(),
        }),
      { what: 'joining the Kafka consumer group', retriable: (err) => !this.closed && isRetriable(err), timeoutMs, onRetry: ({ err }) => failed?.(err) },
    );
  }

  private attach(stream: MessagesStream<Buffer, Buffer, Buffer, Buffer>): void {
    this.stream = stream;
    this.lastFetch = Date.now();
    stream.on('fetch', () => {
      this.lastFetch = Date.now();
      this.lastProgress = this.lastFetch;
    });
    // One lasting listener: removing the last one would stop the stream's fetches.
    stream.on('readable', () => this.wakeLoop?.());
    stream.on('error', (err) => {
      if (this.stream !== stream || this.closed) return;
      this.trouble = err.message;
      this.outage.fail({ topic: this.options.topic, groupId: this.options.groupId }, err.message);
      this.logger.debug({ err, topic: this.options.topic }, 'the Kafka messages stream failed; a new one reads on from the committed offsets');
      this.restarting ??= this.restart(stream).finally(() => (this.restarting = undefined));
    });
  }

  /** A failed stream (a fetch refused, its broker gone) is replaced: the new one rejoins and reads from the committed offsets. */
  private async restart(old: MessagesStream<Buffer, Buffer, Buffer, Buffer>): Promise<void> {
    await old.close().catch(() => undefined);
    while (!this.closed && !this.failed) {
      await sleep(RESTART_PAUSE_MS, { unref: true });
      if (this.closed) return;
      try {
        this.attach(await this.consume(this.options.joinTimeoutMs));
        this.wakeLoop?.();
        return;
      } catch (err) {
        this.trouble = (err as Error).message;
        this.logger.debug({ err, topic: this.options.topic }, 'reopening the Kafka messages stream failed; trying again');
      }
    }
  }

  private onJoin(generationId: number, memberId: string, assignments: readonly GroupAssignment[]): void {
    const partitions = new Set(assignments.filter((a) => a.topic === this.options.topic).flatMap((a) => a.partitions));
    // After each join the stream reads on from the committed offsets, but it keeps its read-ahead
    // position for a partition without any (fallback only when it has none): records fetched and
    // not handed out before the rebalance would be skipped for good. Forgetting the positions
    // here, before the stream's own join listener runs, makes it start them from the beginning.
    this.stream?.offsetsToFetch.clear();
    this.membership = { generationId, memberId, partitions };
    this.trouble = undefined;
    if (this.outage.active) this.outage.recover({ topic: this.options.topic });
    this.lastFetch = Date.now();
    this.lastProgress = this.lastFetch;
    // Offsets marked done under the old membership are not committed: the stream re-reads from what was.
    this.done.clear();
    this.rewinds.clear();
    this.events.joined?.(partitions.size);
    this.wakeLoop?.();
  }

  private async loop(onBatch: (batch: ReaderBatch) => Promise<void>): Promise<void> {
    while (!this.closed && !this.failed) {
      const round: Fetched[] = [];
      for (let m = this.stream?.read() as Message | null; m; m = round.length < MAX_ROUND ? (this.stream?.read() as Message | null) : null) {
        const consumer = (m.metadata as { consumer?: Membership }).consumer;
        const membership = { generationId: consumer?.generationId ?? -1, memberId: consumer?.memberId ?? '' };
        const key = `${membership.generationId}:${membership.memberId}`;
        const rewind = this.rewinds.get(m.partition);
        if (rewind && m.offset !== rewind.offset && Date.now() - rewind.since < REWIND_MAX_MS) {
          // Read ahead before the rewind (a fetch answered after it moves the position on again).
          if (m.offset > rewind.offset) this.stream?.offsetsToFetch.set(`${m.topic}:${m.partition}`, rewind.offset);
          continue;
        }
        const given = this.given.get(m.partition);
        if (!rewind && given?.key === key && m.offset < given.next) continue;
        this.rewinds.delete(m.partition);
        this.given.set(m.partition, { key, next: m.offset + 1n });
        round.push({ partition: m.partition, membership, message: m });
      }
      if (round.length === 0) {
        await this.commitIfDue();
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 1000);
          this.wakeLoop = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        continue;
      }
      this.lastProgress = Date.now();
      const batches = batchesOf(round);
      const concurrently = this.options.partitionsConcurrently ?? 1;
      for (let i = 0; i < batches.length && !this.closed; i += concurrently) {
        await Promise.all(batches.slice(i, i + concurrently).map((b) => this.handle(onBatch, b)));
      }
      await this.commitIfDue();
    }
  }

  private async handle(onBatch: (batch: ReaderBatch) => Promise<void>, fetched: Fetched[]): Promise<void> {
    const batch = this.batchOf(fetched);
    try {
      await onBatch(batch);
    } catch (err) {
      this.logger.debug({ err, topic: this.options.topic, partition: batch.partition }, 'a batch ended with an error');
      // After a rebalance the stream reads on from the committed offsets by itself; otherwise the
      // records not committed (or not marked done) are read again from the first of them.
      if (!batch.active() || this.options.commit.kind === 'none') return;
      const from = this.options.commit.kind === 'manual' ? batch.committedUpTo : (this.done.get(batch.partition)?.offset ?? null);
      const first = fetched[0]!.message.offset;
      const offset = from !== null && from > first ? from : first;
      if (offset > fetched[fetched.length - 1]!.message.offset) return;
      this.rewinds.set(batch.partition, { offset, since: Date.now() });
      this.stream?.offsetsToFetch.set(`${this.options.topic}:${batch.partition}`, offset);
    }
  }

  private batchOf(fetched: Fetched[]): ReaderBatch & { readonly committedUpTo: bigint | null } {
    const { topic } = this.options;
    const { partition, membership } = fetched[0]!;
    const active = (): boolean => {
      const now = this.membership;
      return (
        !this.closed &&
        !this.failed &&
        now !== undefined &&
        now.generationId === membership.generationId &&
        now.memberId === membership.memberId &&
        now.partitions.has(partition)
      );
    };
    const last = fetched[fetched.length - 1]!.message;
    let committedUpTo: bigint | null = null;
    return {
      get committedUpTo() {
        return committedUpTo;
      },
      topic,
      partition,
      records: fetched.map(({ message: m }) => ({ offset: m.offset.toString(), key: m.key ?? null, value: m.value ?? null, headers: headersOf(m.headers) })),
      active,
      heartbeat: async () => {
        // Waiting for room is no stall; the library heartbeats the group by itself.
        this.lastProgress = Date.now();
        if (!active()) throw new RebalancingError();
      },
      markDone: (offset) => {
        if (!active()) return;
        const next = BigInt(offset) + 1n;
        const prev = this.done.get(partition);
        if (!prev || prev.offset < next)
          this.done.set(partition, { topic, partition, offset: next, leaderEpoch: last.leaderEpoch, metadata: null, membership });
      },
      commit: async (nextOffset, metadata) => {
        if (!active()) return false;
        await this.commitAs(membership, [{ topic, partition, offset: BigInt(nextOffset), leaderEpoch: last.leaderEpoch, metadata }]);
        committedUpTo = BigInt(nextOffset);
        return !this.closed;
      },
    };
  }

  private async commitAs(membership: Membership, offsets: OffsetToCommit[]): Promise<void> {
    try {
      await this.committer.commit(membership, offsets);
    } catch (err) {
      typed(err);
      if (STALE_TYPES.has(protocolErrorName(err) ?? '') && this.membership?.generationId === membership.generationId) {
        this.membership = undefined;
        this.rejoining ??= this.rejoin().finally(() => (this.rejoining = undefined));
      }
      throw err;
    }
  }

  private async commitIfDue(): Promise<void> {
    const { commit } = this.options;
    if (commit.kind !== 'interval' || Date.now() - this.lastCommit < commit.intervalMs) return;
    await this.commitDone().catch((err: unknown) =>
      this.logger.debug({ err, topic: this.options.topic }, 'committing handled offsets failed; the next interval tries again'),
    );
  }

  /** Interval commits: what was marked done under the current membership. */
  private async commitDone(): Promise<void> {
    this.lastCommit = Date.now();
    const now = this.membership;
    if (this.options.commit.kind !== 'interval' || !now || this.done.size === 0) return;
    const offsets = [...this.done.values()].filter((o) => o.membership.generationId === now.generationId && o.membership.memberId === now.memberId);
    this.done.clear();
    if (offsets.length > 0)
      await this.commitAs(
        now,
        offsets.map(({ membership: _m, ...o }) => o),
      );
  }

  /**
   * The coordinator no longer knows this membership (a restarted broker, an expired session) but
   * the library's heartbeat may not have noticed yet: unless it rejoins by itself within one
   * heartbeat interval, rejoin here. A rejoin that fails leaves the reader failed (its owner replaces it).
   */
  private async rejoin(): Promise<void> {
    await sleep(this.options.heartbeatIntervalMs, { unref: true });
    if (this.membership || this.closed || this.failed) return;
    try {
      await this.consumer.joinGroup(this.groupOptions());
    } catch (err) {
      if (!this.membership && !this.closed) this.fail(typed(err));
    }
  }

  private checkStalled(stallMs: number): void {
    // A member without partitions fetches nothing: silence is expected there.
    if (this.closed || this.failed || this.membership?.partitions.size === 0) return;
    const silent = Date.now() - this.lastProgress;
    if (silent >= stallMs) this.fail(new StalledReaderError(silent));
  }

  private fail(err: unknown): void {
    if (this.failed || this.closed) return;
    this.failed = true;
    this.membership = undefined;
    clearInterval(this.watchdog);
    this.wakeLoop?.();
    this.events.failed?.(err);
  }
}

/** Worth asking again: a coordinator loading or moving, a broker not reachable yet, a topic not yet in a broker's metadata. */
function isRetriable(err: unknown): boolean {
  for (let e = err as { canRetry?: unknown; errors?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 5; depth++) {
    if (e.canRetry === true) return true;
    const inner = Array.isArray(e.errors) ? (e.errors as unknown[]).at(-1) : undefined;
    e = (inner ?? e.cause) as typeof e;
  }
  return false;
}

function headersOf(headers: Map<Buffer, Buffer> | undefined): RecordHeaders | undefined {
  if (!headers || headers.size === 0) return undefined;
  const out: RecordHeaders = {};
  for (const [k, v] of headers) out[k.toString()] = v;
  return out;
}
