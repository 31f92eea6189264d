/**
 * The small interfaces the core depends on. Adapters (src/store, src/pool, src/worker-id, ...)
 * implement them; entry points wire them. Nothing here does I/O.
 */
import type { Block } from './block.js';
import type { IdCodec, IdFormat } from './format/format.js';

/** `^[a-z0-9][a-z0-9._-]{0,63}$` */
export const BIZ_TAG_PATTERN = /^[a-z0-9][a-z0-9._-]{0,63}$/;

/** Largest segment ID: segment IDs live in [1, 2^53-1], Snowflake IDs in [2^53, 2^63) (invariant 4). */
export const MAX_SEGMENT_ID = Number.MAX_SAFE_INTEGER;

/** Whether a tag of this mode takes segments from a counter (segment, sharded), as opposed to a clock (snowflake, uid). */
export const hasCounter = (mode: string): boolean => mode === 'segment' || mode === 'sharded';

/** Most shards a tag may have (the `shards` column's CHECK says the same). */
export const MAX_SHARDS = 64;

/** Largest step (segment size) one allocation takes: steps live in an `int4` column, as Leaf's do. */
export const MAX_STEP = 2_147_483_647;

export type BizMode = 'segment' | 'snowflake' | 'uid' | 'sharded';

/** What a segment-mode tag does when its pool cannot serve: allocate directly, use Snowflake, or refuse. */
export type FallbackPolicy = 'segment' | 'snowflake' | 'error';

/**
 * Where a segment tag's pre-minted IDs live. `auto` means a Redis list when the deployment has
 * Redis, otherwise the in-memory double buffer.
 */
export type PoolKind = 'auto' | 'memory' | 'redis-list' | 'redis-counter' | 'kafka';

export interface BizTag {
  readonly bizTag: string;
  readonly mode: BizMode;
  /** Base step: the segment size the tag starts with and never shrinks below. */
  readonly step: number;
  /** Inclusive upper bound of IDs; `null` means MAX_SEGMENT_ID. */
  readonly maxLimit: number | null;
  /** Number of shards (sharded mode); 1 otherwise. */
  readonly shards: number;
  readonly fallback: FallbackPolicy;
  readonly pool: PoolKind;
  /** How IDs look at the edge (see core/format); fixed when the tag is created. */
  readonly format: IdFormat;
  readonly description: string;
  readonly createdAt: Date;
  readonly updatedAt: Date;
  /** The floor: every ID at or below it belongs to before (an import); none is handed out. Default 0. */
  readonly startAfter?: number;
  /** An obfuscated tag's key, as a keyed fingerprint: a process with another key refuses the tag. */
  readonly keyFingerprint?: string | null;
}

export interface BizTagInput {
  bizTag: string;
  mode?: BizMode;
  step?: number;
  maxLimit?: number | null;
  shards?: number;
  fallback?: FallbackPolicy;
  pool?: PoolKind;
  /** Fixed at creation: a changed format would make the IDs already handed out undecodable. */
  format?: IdFormat;
  description?: string;
  /**
   * Raise the tag's counters (every shard) so each ID it allocates from now on is above this
   * value: continuing another generator's sequence (e.g. Leaf's `max_id`). Never lowers a counter.
   */
  startAfter?: number;
  /** The creating process's key fingerprint, stamped on an obfuscated tag (set by the server, not the caller). */
  keyFingerprint?: string;
}

export type BizTagPatch = Partial<Omit<BizTagInput, 'bizTag' | 'keyFingerprint'>>;

/** An inclusive range of IDs `[start, end]`, allocated once (invariant 3). Values are safe integers. */
export interface Segment {
  readonly bizTag: string;
  readonly shard: number;
  readonly start: number;
  readonly end: number;
}

/** Takes one fresh segment of `step` IDs for a tag (and shard). Each call returns a new range. */
export interface SegmentAllocator {
  allocate(bizTag: string, step: number, options?: { shard?: number; by?: string }): Promise<Segment>;
}

/** Business tags plus segment allocation: implemented over Postgres and PGlite. */
export interface BizStore extends SegmentAllocator {
  createBiz(input: BizTagInput): Promise<BizTag>;
  /** `null` for unknown or deleted tags. */
  getBiz(bizTag: string): Promise<BizTag | null>;
  listBiz(): Promise<BizTag[]>;
  /** `countersRaised`: a `startAfter` moved the counters (false when an earlier one already set a floor at or above it). */
  updateBiz(bizTag: string, patch: BizTagPatch): Promise<BizTag & { countersRaised?: boolean }>;
  /** Soft delete; the tag's counters are kept so a re-created tag never repeats IDs. */
  deleteBiz(bizTag: string): Promise<void>;
  close(): Promise<void>;
}

/** How far each tag's counters have gone: the highest ID allocated over its shards (0 when none). */
export interface SegmentUsage {
  highestAllocated(bizTags: readonly string[]): Promise<Map<string, number>>;
}

/** Milliseconds since the Unix epoch. Injected so tests can step the clock. */
export interface Clock {
  now(): number;
  /**
   * Waits `ms` by this clock: what a deadline measured with `now()` waits with, so a test clock
   * that steps time on a wait runs a retry or a wait for a pool without real time passing.
   * Default (absent): a real timer. Waited through `sleep` in core/retry.ts.
   */
  sleep?(ms: number): Promise<void>;
}

export const systemClock: Clock = Object.freeze({ now: () => Date.now() });

/** A worker id held by this process; `close()` stops heartbeats and releases what can be released. */
export interface WorkerIdLease {
  readonly workerId: number;
  /** Where the id came from, for logs and /readyz: `zookeeper`, `postgres`, `redis`, `file`, `static`. */
  readonly provider: string;
  /**
   * The clock guard, required of every lease: throws (CLOCK_BACKWARDS, NOT_READY,
   * WORKER_ID_UNAVAILABLE) when an ID stamped `timestampMs` must not leave — behind the last
   * recorded time, or the lease lost. SnowflakeSource consults it before handing IDs out.
   */
  assertIssuable(timestampMs: number): void;
  /** Whether the server behind the id answers (ZooKeeper): IDs may still flow on the local mark while it does not. */
  health?(): { ok: boolean; message?: string };
  close(): Promise<void>;
}

export interface WorkerIdProvider {
  /** Obtains a worker id in `[0, maxWorkerId]`, or throws WORKER_ID_UNAVAILABLE. */
  acquire(options: { maxWorkerId: number }): Promise<WorkerIdLease>;
}

/** Where a batch of IDs came from, as reported to callers. */
export type IdSourceName = 'pool' | 'segment' | 'snowflake';

export interface TakeContext {
  /** Shard for sharded tags; undefined lets the source choose. */
  shard?: number;
  /** Absolute deadline (epoch ms) after which the caller no longer wants an answer. */
  deadline?: number;
}

/**
 * One way of serving IDs for a tag. `take` returns up to `count` IDs as decimal strings and may
 * return fewer (even none) when it runs short; it throws an IdmintError when it cannot serve at all.
 * Invariant 2: the IDs must already have left the source (popped, committed) when `take` resolves.
 */
export interface IdSource {
  readonly name: IdSourceName;
  take(tag: BizTag, count: number, context?: TakeContext): Promise<string[]>;
  /** The same IDs as contiguous blocks, where the source holds them as ranges (segments, memory buffers). */
  takeBlocks?(tag: BizTag, count: number, context?: TakeContext): Promise<Block[]>;
  /** Drops the IDs held for a tag whose counters moved (e.g. `startAfter`): they become gaps, never reused. */
  forget?(bizTag: string): Promise<void> | void;
  close?(): Promise<void>;
}

export interface DispenseResult {
  readonly bizTag: string;
  /** Decimal strings (invariant 7); a formatted tag's IDs in its format. */
  readonly ids: string[];
  readonly source: IdSourceName;
  /** Set only for a formatted tag (`obfuscated`, `base62`, `sqids`...): the form of `ids`. Absent means decimal. */
  readonly format?: string;
}

/** `count` IDs as contiguous blocks (segment tags): what `GET /v1/blocks` and Kafka `"as":"blocks"` answer. */
export interface BlocksResult {
  readonly bizTag: string;
  readonly blocks: Block[];
  readonly source: IdSourceName;
}

/** What every transport (HTTP, Kafka responder, CLI) calls: implemented by src/dispenser/dispenser.ts. */
export interface IdDispenser {
  get(bizTag: string, count: number, context?: TakeContext): Promise<DispenseResult>;
  getBlocks?(bizTag: string, count: number, context?: TakeContext): Promise<BlocksResult>;
}

/** What the HTTP API needs of the dispenser: IDs, blocks, and the tag facts its routes use. */
export interface IdService extends IdDispenser {
  readonly maxCount: number;
  readonly maxBlockCount: number;
  getBlocks(bizTag: string, count: number, context?: TakeContext): Promise<BlocksResult>;
  /** The tag's settings (cached), or null when unknown or deleted. */
  tag(bizTag: string): Promise<BizTag | null>;
  /** The tag's format codec, or undefined for decimal IDs. */
  codecFor(tag: BizTag): IdCodec | undefined;
}

/** What the tag admin routes need: whether this process can serve a setting, and dropping cached state after a change. */
export interface TagAdmin {
  poolRefusal(pool: PoolKind): string | undefined;
  formatRefusal(format: IdFormat): string | undefined;
  /** Drops cached settings of a changed tag. */
  invalidate(bizTag: string): void;
  /** Drops every ID held for a tag whose counters were raised (gaps, never reused). */
  forget(bizTag: string): Promise<void>;
}

/**
 * Where a refill puts fresh segments: a Redis list, a Redis counter, or a Kafka pool topic.
 * The refill processor (src/refill) takes a segment from the store, then calls `push`; it never
 * pushes one segment twice (invariant 3): a retry takes a new segment.
 */
export interface PoolSink {
  readonly kind: Exclude<PoolKind, 'auto' | 'memory'>;
  /** IDs ready to hand out for this tag and shard (list length, counter room, unconsumed topic IDs). */
  depth(bizTag: string, shard: number): Promise<number>;
  push(segment: Segment): Promise<void>;
  /** Drops a deleted tag's pool. */
  remove(bizTag: string): Promise<void>;
}

export type RefillReason = 'threshold' | 'cron' | 'manual';

/** How a pool asks for a refill; src/refill's RefillQueue implements it (deduplicated per tag/shard). */
export interface RefillTrigger {
  requestRefill(bizTag: string, shard: number, reason: RefillReason): Promise<void>;
}

/**
 * What the refill side keeps per pool where every refill process reads it (src/pool/redis's
 * RedisPoolMeta): the demand it sizes targets by and the target it chose. A pool whose takes do
 * not record their demand themselves (a Kafka pool topic, consumed by the SDK) is read and
 * recorded here by the one process that holds a tick's lease.
 */
export interface DemandStore {
  /** Records `count` IDs taken from the pool. */
  record(bizTag: string, shard: number, count: number): Promise<void>;
  /** A rate measured between two readings, counted for a few seconds: a jump in demand is sized for at once. */
  recordBurst(bizTag: string, shard: number, ratePerSecond: number): Promise<void>;
  /** The target depth the refill last chose, or null before it chose one. */
  target(bizTag: string, shard: number): Promise<number | null>;
  /** Stores the values and returns what was there, in one step: the reading the next reader compares against. */
  swap<K extends string>(bizTag: string, shard: number, values: Record<K, number>): Promise<Record<K, number | null>>;
  /** True for the one caller that takes the named lease until it expires (a periodic job run by one process of many). */
  lease(name: string, ms: number): Promise<boolean>;
}

/**
 * Facts every process of one deployment must share, recorded where all of them see it (Postgres):
 * the first process to claim a name records its value; every later claim returns that value.
 */
export interface SettingRegistry {
  /** Records `value` under `name` unless a value is recorded already; returns the recorded value. */
  claim(name: string, value: string): Promise<string>;
  get(name: string): Promise<string | undefined>;
}

/** A tag access token as listed: never the token itself, which is shown once, at creation. */
export interface TagTokenInfo {
  readonly id: string;
  /** The token's first characters, to tell tokens apart. */
  readonly prefix: string;
  readonly createdAt: Date;
  /** Set once revoked: the token no longer opens the tag, and keeps it closed to callers without one. */
  readonly revokedAt?: Date;
}

/** Who may take a tag's IDs: everyone (`closed: false`), or only callers presenting one of `hashes` (none left once every token was revoked). */
export interface TagAccess {
  readonly closed: boolean;
  /** SHA-256 hex digests of the tag's live tokens. */
  readonly hashes: readonly string[];
}

/**
 * Per-tag access tokens (Tinyid's per-bizType token, stored hashed and rotatable): a tag that was
 * ever given a token hands out IDs over HTTP only to callers presenting a live one — revoking the
 * last token leaves it closed to everyone — until an admin opens it again (`open`).
 */
export interface TagTokenStore {
  /** A new token for the tag: the only time its value is seen. */
  create(bizTag: string): Promise<TagTokenInfo & { token: string }>;
  list(bizTag: string): Promise<TagTokenInfo[]>;
  /** Throws UNKNOWN_BIZ_TAG-like BAD_REQUEST when the id is not the tag's live token. */
  revoke(bizTag: string, id: string): Promise<void>;
  /** Removes every token of the tag, live and revoked: the tag is open to every caller again. Returns how many were removed. */
  open(bizTag: string): Promise<number>;
  access(bizTag: string): Promise<TagAccess>;
  /** Every live tag's access at once (open tags included), for caching ahead of an outage. */
  accessAll(): Promise<Map<string, TagAccess>>;
}

/** A change pushed by Postgres (the triggers of migration 8): which table, and the tag when it has one. */
export interface Change {
  readonly table: 'idmint_biz' | 'idmint_tag_token' | 'idmint_setting' | 'idmint_region';
  readonly bizTag?: string;
}

export interface ChangeHandlers {
  change(change: Change): void;
  /** The feed was lost or is back: changes meanwhile may have been missed, drop what is cached. */
  reset(): void;
}

export interface ChangeFeed {
  /** Until the returned function is called. */
  subscribe(handlers: ChangeHandlers): () => void;
  /** Whether the listening connection is up (changes arrive in ~100 ms; else caches rely on their bound). */
  readonly connected: boolean;
  close(): Promise<void>;
}
