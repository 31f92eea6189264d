import { BadRequestError, dependencyOf, forCaller, IdmintError, UnknownBizTagError } from '../core/errors.js';
import {
  BIZ_TAG_PATTERN,
  systemClock,
  type BizStore,
  type BizTag,
  type BlocksResult,
  type Clock,
  type DispenseResult,
  type IdService,
  type IdSource,
  type IdSourceName,
  type PoolKind,
  type TakeContext,
} from '../core/ports.js';
import type { DispenserMetrics } from './metrics.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { checkInteger, defaults, OptionsError, resolveOptions } from '../core/options.js';
import { poolKindOf } from '../core/pool-kind.js';
import { Episode } from '../core/episode.js';
import { retry } from '../core/retry.js';
import { blocksOf, blocksSize, type Block } from '../core/block.js';
import type { IdCodec, IdFormat } from '../core/format/format.js';
import { TagCache, TAG_CACHE_DEFAULTS } from './tag-cache.js';
import { annotate, tracingOn } from '../tracing/tracer.js';
import { ATTR, traceDispense, traceTake } from '../tracing/dispense.js';

export interface DispenseRequest {
  readonly bizTag: string;
  readonly count: number;
  readonly context: TakeContext;
  /** `ids` for get() (a list), `blocks` for getBlocks() (contiguous ranges). */
  readonly as: 'ids' | 'blocks';
}

/**
 * Ordered hooks around every request, lists and blocks alike. `before` may veto by throwing (an
 * IdmintError reaches the caller as is); `after` sees the result (`ids`, or `blocks` when
 * `request.as` is `blocks`); `onError` sees failures. A plugin that throws in `after` or `onError`
 * is logged, never allowed to lose IDs already taken.
 */
export interface DispenserPlugin {
  readonly name: string;
  before?(request: DispenseRequest, tag: BizTag): void | Promise<void>;
  after?(request: DispenseRequest, result: DispenseResult | BlocksResult): void | Promise<void>;
  onError?(request: DispenseRequest, error: IdmintError): void | Promise<void>;
}

/**
 * Last word on a failed request: return a result to answer with it, or undefined to fail. A
 * blocks request answered with `ids` gets them as blocks (they must be safe integers).
 */
export type RejectionHandler = (
  request: DispenseRequest,
  error: IdmintError,
) => DispenseResult | BlocksResult | undefined | Promise<DispenseResult | BlocksResult | undefined>;

export type PoolSources = Partial<Record<Exclude<PoolKind, 'auto'>, IdSource>>;

export interface DispenserOptions {
  store: BizStore;
  /** Pool sources by kind; `memory` serves when no other is configured. */
  pools: PoolSources;
  /** What a tag's `auto` pool means here: `redis-list` when Redis is configured, else `memory`. */
  defaultPool?: Exclude<PoolKind, 'auto'>;
  /** Serves fallback `segment`: segments of the tag's step from the store, buffered in this process (Leaf's segment mode). */
  segment?: IdSource;
  /** Serves `snowflake`-mode tags and fallback `snowflake`. */
  snowflake?: IdSource;
  uid?: IdSource;
  sharded?: IdSource;
  /** Largest count per request. Default 10000. */
  maxCount?: number;
  /** Largest count per blocks request (its answer's size does not grow with it). Default 10,000,000. */
  maxBlockCount?: number;
  /**
   * IDs being served at once, across requests, at most; a request that would exceed it is
   * refused with a retriable NOT_READY. Default 1,000,000 (a few large requests cannot stall the server).
   */
  maxIdsInFlight?: number;
  /** How long a tag's settings are cached; changes reach every process within this. Default 1000 ms. */
  tagCacheMs?: number;
  /** The tag cache's time and the wait for a short pool, deadline and pauses (tests step it). Default the system clock. */
  clock?: Clock;
  /**
   * How long a tag with fallback `error` waits for a pool that answers but is short (a new tag's
   * first refill, a burst) before POOL_EMPTY. Other tags take the fallback ladder at once. Default 2000 ms.
   */
  poolWaitMs?: number;
  plugins?: DispenserPlugin[];
  /** The codecs of formatted tags: IDs leave `get()` formatted; pools and segments hold raw IDs. */
  formats?: { codecFor(tag: BizTag): IdCodec | undefined; refusal(format: IdFormat): string | undefined };
  onRejected?: RejectionHandler;
  metrics?: DispenserMetrics;
  logger?: Logger;
}

/** The context of a request that names no shard: shared, so the hot path allocates none. */
const NO_CONTEXT: TakeContext = Object.freeze({});

/** Unknown tag names remembered at most (each for tagCacheMs). */
export const MAX_REMEMBERED_MISSES = TAG_CACHE_DEFAULTS.maxMisses;

export const DISPENSER_DEFAULTS = defaults({
  maxCount: 10_000,
  maxBlockCount: 10_000_000,
  tagCacheMs: TAG_CACHE_DEFAULTS.ttlMs,
  maxIdsInFlight: 1_000_000,
  poolWaitMs: 2000,
});

/**
 * One facade for every transport: get(bizTag, count) -> pool -> fallback (segment | snowflake | error).
 * Segment IDs and Snowflake IDs live in disjoint spaces (invariant 4), so mixing them within one
 * tag never repeats an ID.
 */
export class Dispenser implements IdService {
  private readonly options: Readonly<DispenserOptions & typeof DISPENSER_DEFAULTS>;
  private readonly logger: Logger;
  private readonly tags: TagCache;
  private readonly clock: Clock;
  private inFlight = 0;
  private readonly plugins: readonly DispenserPlugin[];
  private readonly poolOutage: Episode;
  private readonly segmentOutage: Episode;

  constructor(options: DispenserOptions) {
    const merged = resolveOptions<typeof DISPENSER_DEFAULTS, DispenserOptions>(DISPENSER_DEFAULTS, options, (o) => {
      for (const key of ['maxCount', 'maxBlockCount', 'maxIdsInFlight'] as const) checkInteger('Dispenser', o, key, 1);
      checkInteger('Dispenser', o, 'tagCacheMs', 0);
      checkInteger('Dispenser', o, 'poolWaitMs', 0);
      if (!o.pools.memory && !o.defaultPool) throw new OptionsError('Dispenser', 'pools', 'need a memory pool, or give a defaultPool');
    });
    this.options = merged;
    this.plugins = merged.plugins ?? [];
    this.logger = (options.logger ?? silentLogger).child({ component: 'dispenser' });
    this.clock = merged.clock ?? systemClock;
    this.tags = new TagCache({
      store: merged.store,
      ttlMs: merged.tagCacheMs,
      clock: this.clock,
      logger: options.logger ?? silentLogger,
      // Narrowed elsewhere (a startAfter or a lower maxLimit on another process): what is buffered here may lie outside.
      onRangeNarrowed: (bizTag) =>
        void this.dropBuffered(bizTag).catch((err: unknown) =>
          this.logger.warn({ err, bizTag }, 'dropping IDs below a raised floor failed; they are still never handed out'),
        ),
    });
    this.poolOutage = new Episode(this.logger, 'pool unavailable; serving by fallback', { clock: this.clock });
    this.segmentOutage = new Episode(this.logger, 'Postgres cannot serve segments either; serving Snowflake IDs', { clock: this.clock });
  }

  get maxCount(): number {
    return this.options.maxCount;
  }

  get maxBlockCount(): number {
    return this.options.maxBlockCount;
  }

  async get(bizTag: string, count: number, context: TakeContext = NO_CONTEXT): Promise<DispenseResult> {
    return this.dispense({ bizTag, count, context, as: 'ids' }, this.options.maxCount, count, (tag) => this.serveIds(tag, count, context));
  }

  /** A segment tag's IDs as contiguous blocks: pool, then the fallback ladder. Other modes have no contiguous IDs. */
  async getBlocks(bizTag: string, count: number, context: TakeContext = NO_CONTEXT): Promise<BlocksResult> {
    // A blocks answer costs a few ranges whatever its count: it weighs 1 against maxIdsInFlight.
    return this.dispense({ bizTag, count, context, as: 'blocks' }, this.options.maxBlockCount, 1, (tag) => this.serveBlocks(tag, count, context));
  }

  /**
   * The one request path: validation, admission (IDs in flight), the tag, plugins, the error
   * metric and the rejection handler, around `serve`.
   */
  private dispense<R extends DispenseResult | BlocksResult>(
    request: DispenseRequest,
    maxCount: number,
    weight: number,
    serve: (tag: BizTag) => Promise<R>,
  ): Promise<R> {
    // Tracing off: no span, no closure (the check is two property reads).
    if (!tracingOn()) return this.dispenseUntraced(request, maxCount, weight, serve);
    return traceDispense(request.bizTag, request.count, request.as, () => this.dispenseUntraced(request, maxCount, weight, serve));
  }

  private async dispenseUntraced<R extends DispenseResult | BlocksResult>(
    request: DispenseRequest,
    maxCount: number,
    weight: number,
    serve: (tag: BizTag) => Promise<R>,
  ): Promise<R> {
    let admitted = 0;
    try {
      validate(request.bizTag, request.count, maxCount);
      if (this.inFlight > 0 && this.inFlight + weight > this.options.maxIdsInFlight) {
        throw new IdmintError(
          'NOT_READY',
          `busy: ${this.inFlight} IDs are being served (IDMINT_MAX_IDS_IN_FLIGHT ${this.options.maxIdsInFlight}); retry shortly or ask for fewer`,
        );
      }
      admitted = weight;
      this.inFlight += weight;
      // A tag seen before is answered from the cache without a promise (reloads run behind).
      const looked = this.tags.get(request.bizTag);
      const tag = looked instanceof Promise ? await looked : looked;
      if (!tag) throw new UnknownBizTagError(request.bizTag);
      for (const plugin of this.plugins) await plugin.before?.(request, tag);
      const result = await serve(tag);
      for (const plugin of this.plugins) {
        try {
          await plugin.after?.(request, result);
        } catch (err) {
          this.logger.error({ err, plugin: plugin.name }, 'plugin after() failed; the IDs are still returned');
        }
      }
      return result;
    } catch (raw) {
      const error = asIdmintError(raw);
      if (error !== raw) this.logger.error({ err: raw, bizTag: request.bizTag }, 'unexpected failure while dispensing');
      this.options.metrics?.recordError(error);
      for (const plugin of this.plugins) {
        try {
          await plugin.onError?.(request, error);
        } catch (err) {
          this.logger.error({ err, plugin: plugin.name }, 'plugin onError() failed');
        }
      }
      const rescued = await this.options.onRejected?.(request, error);
      if (rescued) return asRequested(request, rescued) as R;
      throw error;
    } finally {
      this.inFlight -= admitted;
    }
  }

  private async serveIds(tag: BizTag, count: number, context: TakeContext): Promise<DispenseResult> {
    // Before the take: a tag this process may not format (its key differs) costs no IDs.
    const codec = this.options.formats?.codecFor(tag);
    const served = await this.serve(tag, count, context);
    this.options.metrics?.recordIssued(tag.bizTag, served.source, served.ids.length);
    return codec ? { ...served, ids: served.ids.map(codec.encode), format: codec.format } : served;
  }

  /** The tag's current settings (cached for tagCacheMs), or null when unknown or deleted. */
  async tag(bizTag: string): Promise<BizTag | null> {
    return this.tags.get(bizTag);
  }

  /**
   * Lists every tag from the store into the tag cache (those it lacks): with Postgres down later,
   * a tag this process has not served yet still takes its fallback ladder instead of NOT_READY.
   * Returns how many were added.
   */
  async preloadTags(): Promise<number> {
    const since = this.tags.changeCount;
    const at = this.clock.now();
    return this.tags.preload(await this.options.store.listBiz(), since, at);
  }

  /** Names held in the tag caches (known tags and remembered misses), for tests and metrics. */
  cachedTagNames(): number {
    return this.tags.size;
  }

  /** Why this process cannot serve a format (no key for an obfuscated one), or undefined. */
  formatRefusal(format: IdFormat): string | undefined {
    if (format === 'decimal') return undefined;
    const formats = this.options.formats;
    return formats ? formats.refusal(format) : `format "${format}" is not configured on this server`;
  }

  /** The tag's format codec, or undefined for decimal IDs (decode uses it to undo the format). */
  codecFor(tag: BizTag): IdCodec | undefined {
    return this.options.formats?.codecFor(tag);
  }

  /** Drops cached settings so the next request reloads them (a change here, or pushed from elsewhere). */
  invalidate(bizTag: string): void {
    this.tags.invalidate(bizTag);
  }

  /** Drops every tag's cached settings (the change feed was lost or is back: a change may have been missed). */
  invalidateAll(): void {
    this.tags.invalidateAll();
  }

  /**
   * Drops every ID this process's sources hold for a tag, after its counters were raised: what
   * they hold lies below the new floor. Dropped IDs are gaps, never reused.
   */
  async forget(bizTag: string): Promise<void> {
    this.invalidate(bizTag);
    await this.dropBuffered(bizTag);
  }

  private async dropBuffered(bizTag: string): Promise<void> {
    const { pools, segment, snowflake, uid, sharded } = this.options;
    const sources = new Set([...Object.values(pools), segment, snowflake, uid, sharded].filter((s): s is IdSource => s !== undefined));
    for (const source of sources) await source.forget?.(bizTag);
  }

  /**
   * Why this process cannot serve a tag with this `pool` setting, or undefined when it can: a
   * Redis pool needs REDIS_URL here (it would otherwise be served from memory, silently).
   */
  poolRefusal(pool: PoolKind): string | undefined {
    if ((pool === 'redis-list' || pool === 'redis-counter') && !this.options.pools[pool]) {
      return `pool "${pool}" needs Redis, and this server has no Redis; use "auto" or "memory", or set REDIS_URL (or REDIS_SENTINELS, REDIS_CLUSTER_NODES)`;
    }
    return undefined;
  }

  /** The pool kind that serves a segment tag here. */
  poolKindFor(tag: BizTag): Exclude<PoolKind, 'auto'> {
    // A Kafka-pool tag's topic feeds SDK consumers; this process serves it from memory buffers.
    if (tag.pool === 'kafka') return this.options.pools.memory ? 'memory' : (this.options.defaultPool ?? 'memory');
    const kind = poolKindOf(tag, this.options.defaultPool ?? 'memory');
    return this.options.pools[kind] ? kind : (this.options.defaultPool ?? 'memory');
  }

  async close(): Promise<void> {
    const { pools, segment, snowflake, uid, sharded } = this.options;
    const sources = new Set([...Object.values(pools), segment, snowflake, uid, sharded].filter((s): s is IdSource => s !== undefined));
    for (const source of sources) await source.close?.();
  }

  private async serve(tag: BizTag, count: number, context: TakeContext): Promise<DispenseResult> {
    switch (tag.mode) {
      case 'snowflake':
        return this.whole(tag, this.required('snowflake', tag), count, context);
      case 'uid':
        return this.whole(tag, this.required('uid', tag), count, context);
      case 'sharded':
        return this.whole(tag, this.required('sharded', tag), count, context);
      case 'segment':
        return this.segmentMode(tag, count, context);
    }
  }

  private async whole(tag: BizTag, source: IdSource, count: number, context: TakeContext): Promise<DispenseResult> {
    const ids = await takeFrom(source, tag, count, context);
    if (ids.length < count) throw new IdmintError('POOL_EMPTY', `the ${source.name} source for "${tag.bizTag}" returned ${ids.length} of ${count} IDs`);
    return { bizTag: tag.bizTag, ids, source: source.name };
  }

  private async segmentMode(tag: BizTag, count: number, context: TakeContext): Promise<DispenseResult> {
    const kind = this.poolKindFor(tag);
    const pool = this.options.pools[kind];
    if (!pool) throw new IdmintError('NOT_READY', `no pool is configured for "${tag.bizTag}"`);
    // A lowered max_limit, or a floor raised elsewhere, leaves IDs outside the tag's range in
    // buffers and pools: drop them (gaps), never hand them out.
    const floor = tag.startAfter ?? 0;
    const ceiling = tag.maxLimit;
    const take = async (n: number): Promise<string[]> => {
      const taken = await takeFrom(pool, tag, n, context, kind);
      return ceiling === null && floor === 0 ? taken : taken.filter((id) => Number(id) > floor && (ceiling === null || Number(id) <= ceiling));
    };
    const { items: ids, error: poolError } = await this.fromPool(tag, count, take, (taken) => taken.length);
    if (ids.length >= count) return { bizTag: tag.bizTag, ids, source: pool.name };

    const missing = count - ids.length;
    const { source, value: rest } = await this.fallBack(tag, poolError, async (fallback) => {
      const taken = await takeFrom(fallback, tag, missing, context);
      // The segment rung buffers too: the same range rule (Snowflake IDs lie above every limit's tag: no such fallback).
      return fallback === this.options.segment && (ceiling !== null || floor > 0)
        ? taken.filter((id) => Number(id) > floor && (ceiling === null || Number(id) <= ceiling))
        : taken;
    });
    if (rest.length < missing) throw new IdmintError('POOL_EMPTY', `fallback ${source} for "${tag.bizTag}" returned ${rest.length} of ${missing} IDs`);
    // Report the fallback whenever it served any part of the batch, so callers see degraded service.
    return { bizTag: tag.bizTag, ids: ids.length === 0 ? rest : ids.concat(rest), source };
  }

  /** A pool's failure: a hard limit or an unknown tag is final (thrown); one that cannot serve right now is returned for the ladder. */
  private poolFailed(tag: BizTag, raw: unknown): IdmintError {
    const error = asIdmintError(raw);
    if (error !== raw) this.logger.error({ err: raw, bizTag: tag.bizTag }, 'unexpected failure in a pool');
    if (!error.retriable) throw error;
    annotate(ATTR.poolError, error.code);
    this.poolOutage.fail({ bizTag: tag.bizTag, code: error.code }, error.message, dependencyOf(error));
    return error;
  }

  /**
   * The pool's part of a request: what it hands out, and the failure that sends the rest down the
   * ladder. A tag that may not fall back waits up to poolWaitMs for a pool that answers but is
   * short (the short take requested its refill), taking what arrives.
   */
  private async fromPool<T>(
    tag: BizTag,
    count: number,
    take: (n: number) => Promise<T[]>,
    size: (items: T[]) => number,
  ): Promise<{ items: T[]; error?: IdmintError }> {
    let items: T[];
    try {
      items = await take(count);
    } catch (raw) {
      return { items: [], error: this.poolFailed(tag, raw) };
    }
    this.poolOutage.recover();
    let got = size(items);
    if (got >= count || tag.fallback !== 'error') return { items };
    const short = new Error('the pool is still short');
    try {
      await retry(
        async (n) => {
          // The first take was made above: the wait starts with a pause.
          if (n > 0) {
            const taken = await take(count - got);
            got += size(taken);
            items = items.concat(taken);
          }
          if (got < count) throw short;
        },
        {
          what: `waiting for the pool of "${tag.bizTag}"`,
          retriable: (err) => err === short,
          timeoutMs: this.options.poolWaitMs,
          initialMs: 10,
          maxMs: 200,
          clock: this.clock,
        },
      );
    } catch (raw) {
      if (raw !== short) return { items, error: this.poolFailed(tag, raw) };
    }
    return { items };
  }

  /**
   * The fallback ladder of a segment tag whose pool could not serve: a segment straight from
   * Postgres first (short increasing IDs, as the tag's users expect), then Snowflake — only when
   * Postgres cannot serve either and the tag's fallback is `snowflake`. A pool that is merely
   * catching up is therefore never answered with Snowflake IDs while Postgres is healthy.
   */
  private async fallBack<T>(
    tag: BizTag,
    cause: IdmintError | undefined,
    take: (source: IdSource) => Promise<T>,
    withSnowflake = true,
  ): Promise<{ source: IdSourceName; value: T }> {
    const { segment, snowflake } = this.options;
    const ladder = [tag.fallback !== 'error' ? segment : undefined, tag.fallback === 'snowflake' && withSnowflake ? snowflake : undefined].filter(
      (s): s is IdSource => s !== undefined,
    );
    let last = cause;
    for (const source of ladder) {
      try {
        annotate(ATTR.fallback, source.name);
        return { source: source.name, value: await take(source) };
      } catch (raw) {
        last = asIdmintError(raw);
        // A hard limit is final; only a source that cannot serve right now passes to the next rung.
        if (!last.retriable || source === ladder[ladder.length - 1]) throw last;
        this.segmentOutage.fail({ bizTag: tag.bizTag, code: last.code }, last.message, dependencyOf(last));
      }
    }
    if (last) throw last;
    throw new IdmintError('POOL_EMPTY', `the pool for "${tag.bizTag}" is empty and its fallback is "${tag.fallback}"; retry shortly`);
  }

  private async serveBlocks(tag: BizTag, count: number, context: TakeContext): Promise<BlocksResult> {
    const bizTag = tag.bizTag;
    if (tag.mode !== 'segment') {
      throw new BadRequestError(`blocks are for segment tags; "${bizTag}" is a ${tag.mode} tag, whose IDs are not contiguous: use GET /v1/ids`, 'bizTag');
    }
    if (this.options.formats?.codecFor(tag)) {
      throw new BadRequestError(`"${bizTag}" hands out ${tag.format} IDs, which are not contiguous ranges: use GET /v1/ids`, 'bizTag');
    }
    const pool = this.options.pools[this.poolKindFor(tag)];
    if (!pool) throw new IdmintError('NOT_READY', `no pool is configured for "${tag.bizTag}"`);
    const takeBlocks = (source: IdSource, n: number): Promise<Block[]> => {
      const run = (): Promise<Block[]> => (source.takeBlocks ? source.takeBlocks(tag, n, context) : source.take(tag, n, context).then(blocksOf));
      return tracingOn() ? traceTake(source.name, tag.bizTag, n, source === pool ? this.poolKindFor(tag) : undefined, run) : run();
    };
    const take = async (n: number): Promise<Block[]> => {
      const taken = await takeBlocks(pool, n);
      return tag.maxLimit === null && !tag.startAfter ? taken : clip(taken, tag.startAfter ?? 0, tag.maxLimit ?? Number.MAX_SAFE_INTEGER);
    };
    const { items, error: poolError } = await this.fromPool(tag, count, take, blocksSize);
    let blocks = items;
    const got = blocksSize(blocks);
    let source: IdSourceName = pool.name;
    if (got < count) {
      // No Snowflake rung for blocks: its IDs exceed 2^53, and a block is two safe integers. With
      // the pool and Postgres both down, blocks answer NOT_READY while /v1/ids serves Snowflake.
      const rest = await this.fallBack(tag, poolError, (fallback) => takeBlocks(fallback, count - got), false);
      blocks = blocks.concat(rest.value);
      source = rest.source;
    }
    this.options.metrics?.recordIssued(bizTag, source, count);
    return { bizTag, blocks, source };
  }

  private required(kind: 'snowflake' | 'uid' | 'sharded', tag: BizTag): IdSource {
    const source = this.options[kind];
    if (!source) throw new IdmintError('NOT_READY', `"${tag.bizTag}" is a ${kind} tag but this process has no ${kind} generator`);
    return source;
  }
}

function validate(bizTag: string, count: number, maxCount: number): void {
  if (typeof bizTag !== 'string' || !BIZ_TAG_PATTERN.test(bizTag)) {
    throw new BadRequestError(`bizTag must match ${BIZ_TAG_PATTERN.source}`, 'bizTag');
  }
  if (!Number.isInteger(count) || count < 1 || count > maxCount) {
    throw new BadRequestError(`count must be an integer from 1 to ${maxCount}`, 'count');
  }
}

/** An unexpected failure or a misconfiguration: its raw message goes to the log (the caller logs `cause`), never to the client. */
function asIdmintError(err: unknown): IdmintError {
  return forCaller(err, 'internal fault while dispensing');
}

export type { IdSourceName };

/** A rejection handler's answer in the shape the request asked for. */
function asRequested(request: DispenseRequest, result: DispenseResult | BlocksResult): DispenseResult | BlocksResult {
  if (request.as === 'ids' || 'blocks' in result) return result;
  return { bizTag: result.bizTag, blocks: blocksOf(result.ids), source: result.source };
}

/** One source's take, in a span of its own when tracing is on (no closure when off). */
function takeFrom(source: IdSource, tag: BizTag, count: number, context: TakeContext, poolKind?: string): Promise<string[]> {
  if (!tracingOn()) return source.take(tag, count, context);
  return traceTake(source.name, tag.bizTag, count, poolKind, () => source.take(tag, count, context));
}

/** The blocks cut to (floor, maxLimit]: what lies outside stays unissued (a gap). */
function clip(blocks: Block[], floor: number, maxLimit: number): Block[] {
  const out: Block[] = [];
  for (const b of blocks) {
    if (b.start > maxLimit || b.end <= floor) continue;
    out.push(b.start > floor && b.end <= maxLimit ? b : { start: Math.max(b.start, floor + 1), end: Math.min(b.end, maxLimit) });
  }
  return out;
}
