import { setImmediate as turnOfTheEventLoop } from 'node:timers/promises';
import { BadRequestError, IdmintError, TimeoutError } from '../core/errors.js';
import { BIZ_TAG_PATTERN, systemClock } from '../core/ports.js';
import type { Clock } from '../core/ports.js';
import type { Logger } from '../core/logger.js';
import { silentLogger } from '../core/logger.js';
import { failoverTransport } from './failover-transport.js';
import { httpTransport, secretsOf } from './http-transport.js';
import { TagBuffer } from './tag-buffer.js';
import type { TagBufferSettings, TagBufferStats } from './tag-buffer.js';
import type { IdTransport } from './transport.js';
import { checkInteger, OptionsError, resolveOptions } from '../core/options.js';
import { tracedTransport } from '../tracing/client.js';

/**
 * The async calls let the event loop in once every this many IDs they answer from memory. An
 * application looping on `await next()` otherwise never yields: answers from the buffer resolve
 * as microtasks, so the SDK's own fetches (a Kafka consumer's commits, an HTTP prefetch) wait
 * until every such loop in the process has emptied its buffer, and a take waiting on one of them
 * gave POOL_EMPTY (issue 40: 4 instances in one process, 14 POOL_EMPTY a run). One setImmediate
 * per 4,096 IDs costs well under a nanosecond an ID.
 */
export const YIELD_EVERY = 4096;

export interface IdmintClientSettings extends TagBufferSettings {
  /** Longest a `next`/`nextMany` call waits for IDs before TIMEOUT (transport retries included). */
  timeoutMs: number;
}

export const CLIENT_DEFAULTS: Readonly<IdmintClientSettings> = Object.freeze({
  /** Tinyid's default segment size is 1000 too: one round trip per thousand IDs at first. */
  batchSize: 1000,
  /** The server's default IDMINT_MAX_COUNT; a larger ask is refused with BAD_REQUEST. */
  maxBatchSize: 10_000,
  /** Leaf and Tinyid load the next segment at 20 % left (CosId's safe distance is similar). */
  prefetchAt: 0.2,
  /** Grow when a batch lasts under 10 s: a busy tag then makes a round trip every few seconds at most. */
  batchLifeMs: 10_000,
  timeoutMs: 10_000,
});

export interface IdmintClientOptions extends Partial<IdmintClientSettings> {
  /** How to reach the dispenser; or give `url` for an httpTransport with its defaults. */
  transport?: IdTransport;
  url?: string;
  /** Several servers: fetches spread across them, with failover (see failoverTransport). */
  urls?: string[];
  /** With `url` or `urls`: a tag token sent for every tag (`idmint biz token create`). */
  token?: string;
  /** With `url` or `urls`: tokens per tag, over `token` for the tags listed. */
  tokens?: Readonly<Record<string, string>>;
  /** With `url` or `urls`: the server's gate pass (IDMINT_GATE_PASS). */
  gatePass?: string;
  /** Tags to start fetching at once, so their first `next()` finds IDs ready. */
  bizTags?: string[];
  logger?: Logger;
  /** Measures batch lifetimes; injected by tests. */
  clock?: Clock;
}

const MAX_NUMBER_ID = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * The SDK: IDs per tag from a double buffer that refills in the background (Leaf segment
 * mode, Tinyid's client, CosId's SegmentChainId), over any IdTransport. `next` returns a
 * bigint; `nextNumber` a number where the ID fits (segment and sharded tags).
 */
export class IdmintClient {
  readonly settings: Readonly<IdmintClientSettings>;
  private readonly transport: IdTransport;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly buffers = new Map<string, TagBuffer>();
  // Reused by the one-ID string takes, so they allocate no array.
  private readonly oneText: string[] = [];
  private closing: Promise<void> | undefined;
  /** IDs the async calls answered from memory since they last let the event loop in. */
  private served = 0;

  constructor(options: IdmintClientOptions) {
    this.settings = settingsOf(options);
    if ([options.transport, options.url, options.urls].filter((o) => o !== undefined).length > 1) {
      throw new BadRequestError('give the idmint client one of `transport`, `url` or `urls`', 'transport');
    }
    this.logger = (options.logger ?? silentLogger).child({ component: 'client' });
    this.clock = options.clock ?? systemClock;
    let transport: IdTransport;
    if (options.transport) transport = options.transport;
    else if (options.url !== undefined) transport = httpTransport({ url: options.url, ...secretsOf(options), logger: options.logger });
    else if (options.urls !== undefined) transport = failoverTransport({ urls: options.urls, ...secretsOf(options), logger: options.logger });
    else throw new BadRequestError('the idmint client needs a `transport` (httpTransport, kafkaTransport...) or a `url`', 'transport');
    this.transport = tracedTransport(transport);
    for (const tag of options.bizTags ?? []) this.buffer(tag).warm();
  }

  /** One ID as a bigint (Snowflake and uid IDs exceed 2^53). */
  async next(bizTag: string): Promise<bigint> {
    const ready = this.buffer(bizTag).takeOne();
    if (ready !== undefined) {
      if (++this.served >= YIELD_EVERY) await this.letTheEventLoopIn();
      return ready;
    }
    const [id] = await this.collect(bizTag, 1, false);
    return id as bigint;
  }

  /**
   * One ID as the string the server hands it out as: decimal for most tags, the tag's form for a
   * formatted one (`base62`, `sqids`, `obfuscated+base62`...), which `next()` refuses.
   */
  async nextString(bizTag: string): Promise<string> {
    const ready = this.tryNextString(bizTag);
    if (ready !== undefined) return ready;
    const [id] = await this.collectTexts(bizTag, 1);
    return id as string;
  }

  /** `n` IDs as strings (see nextString), in the order handed out. */
  async nextStrings(bizTag: string, n: number): Promise<string[]> {
    if (!Number.isSafeInteger(n) || n < 0) throw new BadRequestError(`n must be a non-negative integer, got ${n}`, 'n');
    if (n === 0) {
      this.buffer(bizTag);
      return [];
    }
    return this.collectTexts(bizTag, n);
  }

  /** `nextString` if an ID is buffered, else undefined (and a fetch starts): never waits. */
  tryNextString(bizTag: string): string | undefined {
    return this.buffer(bizTag).takeTexts(1, this.oneText) === 1 ? (this.oneText.pop() as string) : undefined;
  }

  /** `n` IDs, in the order handed out; not necessarily contiguous. */
  async nextMany(bizTag: string, n: number): Promise<bigint[]> {
    if (!Number.isSafeInteger(n) || n < 0) throw new BadRequestError(`n must be a non-negative integer, got ${n}`, 'n');
    if (n === 0) {
      this.buffer(bizTag);
      return [];
    }
    return this.collect(bizTag, n, false);
  }

  /**
   * One ID as a number, for tags whose IDs stay below 2^53 (segment and sharded modes).
   * A larger ID (Snowflake, uid, or a segment tag's Snowflake fallback) is refused with
   * BAD_REQUEST and stays buffered for the next `next()`.
   */
  async nextNumber(bizTag: string): Promise<number> {
    const [id] = await this.collect(bizTag, 1, true);
    return Number(id);
  }

  /**
   * One ID if one is buffered, else undefined (and a fetch starts in the background): never
   * waits. For callers that can do something else meanwhile, or that batch their own work.
   */
  tryNext(bizTag: string): bigint | undefined {
    return this.buffer(bizTag).takeOne();
  }

  /**
   * `tryNext` as a number, for segment and sharded tags: for a segment tag the SDK holds blocks
   * and this is a counter increment. An ID above 2^53 - 1 throws BAD_REQUEST and stays buffered.
   */
  tryNextNumber(bizTag: string): number | undefined {
    return this.buffer(bizTag).takeNumber();
  }

  /**
   * Fills `into` (from `offset`, up to `count` IDs, by default to its end) with buffered IDs as
   * numbers; returns how many it wrote, 0 when nothing is buffered (a fetch then starts). Never
   * waits. For segment tags a counter loop over the buffered blocks: the fastest synchronous take.
   */
  tryNextNumbers(bizTag: string, into: Float64Array | number[], offset = 0, count = into.length - offset): number {
    if (!Number.isSafeInteger(offset) || offset < 0) throw new BadRequestError(`offset must be a non-negative integer, got ${offset}`, 'offset');
    if (!Number.isSafeInteger(count) || count < 0) throw new BadRequestError(`count must be a non-negative integer, got ${count}`, 'count');
    if (into instanceof Float64Array && offset + count > into.length) {
      throw new BadRequestError(`offset + count (${offset + count}) exceeds the array's length ${into.length}`, 'count');
    }
    return this.buffer(bizTag).takeNumbers(into, offset, count);
  }

  /**
   * The calls of one tag without a lookup per call: for hot loops. The handle stays valid until
   * the client closes.
   */
  tag(bizTag: string): TagHandle {
    const buffer = this.buffer(bizTag);
    return Object.freeze({
      bizTag,
      next: () => this.next(bizTag),
      nextNumber: () => this.nextNumber(bizTag),
      tryNext: () => buffer.takeOne(),
      tryNextNumber: () => buffer.takeNumber(),
      tryNextNumbers: (into: Float64Array | number[], offset?: number, count?: number) => this.tryNextNumbers(bizTag, into, offset, count),
      nextString: () => this.nextString(bizTag),
      tryNextString: () => this.tryNextString(bizTag),
    });
  }

  /** What each tag's buffer holds and does, for metrics and debugging. */
  stats(): TagBufferStats[] {
    return [...this.buffers.values()].map((b) => b.stats());
  }

  /** Idempotent. Buffered IDs are dropped (gaps); later calls reject with NOT_READY. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      for (const b of this.buffers.values()) b.close();
      await this.transport.close();
    })();
    return this.closing;
  }

  private collect(bizTag: string, n: number, asNumber: boolean): Promise<bigint[]> {
    return this.gather<bigint>(bizTag, n, (buffer, want, ids) => {
      if (asNumber) {
        const head = buffer.peek();
        if (head !== undefined && head > MAX_NUMBER_ID) {
          throw new BadRequestError(`ID ${head} of "${bizTag}" exceeds 2^53-1 and cannot be a JS number; use next() for a bigint`, 'bizTag');
        }
      }
      buffer.take(want, ids);
    });
  }

  private collectTexts(bizTag: string, n: number): Promise<string[]> {
    return this.gather<string>(bizTag, n, (buffer, want, ids) => buffer.takeTexts(want, ids));
  }

  /** Takes until `n` IDs are in hand, waiting for fetches up to the client's timeout. */
  private async gather<T>(bizTag: string, n: number, take: (buffer: TagBuffer, want: number, into: T[]) => void): Promise<T[]> {
    const buffer = this.buffer(bizTag);
    const deadline = this.clock.now() + this.settings.timeoutMs;
    const ids: T[] = [];
    for (;;) {
      this.assertOpen();
      take(buffer, n - ids.length, ids);
      if (ids.length === n) {
        if ((this.served += n) >= YIELD_EVERY) await this.letTheEventLoopIn();
        return ids;
      }
      // Partly served: the IDs taken so far are this caller's and stay so across the wait.
      try {
        await this.wait(buffer.fill(n - ids.length), deadline, bizTag);
      } catch (err) {
        // Forget an unknown tag's empty buffer, so arbitrary names cannot grow the map.
        if (err instanceof IdmintError && err.code === 'UNKNOWN_BIZ_TAG' && buffer.buffered === 0 && this.buffers.get(bizTag) === buffer)
          this.buffers.delete(bizTag);
        throw err;
      }
    }
  }

  private async letTheEventLoopIn(): Promise<void> {
    this.served = 0;
    await turnOfTheEventLoop();
  }

  private wait(fill: Promise<void>, deadline: number, bizTag: string): Promise<void> {
    const left = deadline - this.clock.now();
    if (left <= 0) return Promise.reject(new TimeoutError(`getting IDs of "${bizTag}"`, this.settings.timeoutMs));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new TimeoutError(`getting IDs of "${bizTag}"`, this.settings.timeoutMs)), left);
    });
    return Promise.race([fill, timeout]).finally(() => clearTimeout(timer));
  }

  private buffer(bizTag: string): TagBuffer {
    this.assertOpen();
    let b = this.buffers.get(bizTag);
    if (!b) {
      if (typeof bizTag !== 'string' || !BIZ_TAG_PATTERN.test(bizTag)) {
        throw new BadRequestError(`invalid biz tag ${JSON.stringify(bizTag)}: must match ${BIZ_TAG_PATTERN.source}`, 'bizTag');
      }
      b = new TagBuffer(bizTag, this.transport, this.settings, this.clock, this.logger);
      this.buffers.set(bizTag, b);
    }
    return b;
  }

  private assertOpen(): void {
    if (this.closing) throw new IdmintError('NOT_READY', 'the idmint client is closed');
  }
}

/** One tag's calls, from `client.tag(bizTag)`. */
export interface TagHandle {
  readonly bizTag: string;
  next(): Promise<bigint>;
  nextNumber(): Promise<number>;
  tryNext(): bigint | undefined;
  tryNextNumber(): number | undefined;
  /** See IdmintClient.tryNextNumbers. */
  tryNextNumbers(into: Float64Array | number[], offset?: number, count?: number): number;
  nextString(): Promise<string>;
  tryNextString(): string | undefined;
}

export function createIdmintClient(options: IdmintClientOptions): IdmintClient {
  return new IdmintClient(options);
}

function settingsOf(options: IdmintClientOptions): Readonly<IdmintClientSettings> {
  const keys = Object.keys(CLIENT_DEFAULTS) as (keyof IdmintClientSettings)[];
  const given = Object.fromEntries(keys.map((key) => [key, options[key]])) as Partial<IdmintClientSettings>;
  return resolveOptions<IdmintClientSettings>(CLIENT_DEFAULTS, given, (s) => {
    for (const key of ['batchSize', 'maxBatchSize', 'batchLifeMs', 'timeoutMs'] as const) checkInteger('idmint client', s, key, 1);
    if (s.maxBatchSize < s.batchSize)
      throw new OptionsError('idmint client', 'maxBatchSize', `(${s.maxBatchSize}) must be at least batchSize (${s.batchSize})`);
    if (!(s.prefetchAt >= 0 && s.prefetchAt < 1)) throw new OptionsError('idmint client', 'prefetchAt', `must be in [0, 1), got ${s.prefetchAt}`);
  });
}
