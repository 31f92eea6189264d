import { BadRequestError, IdmintError, isIdmintError, notReady } from '../core/errors.js';
import type { Clock } from '../core/ports.js';
import type { Logger } from '../core/logger.js';
import type { IdTransport, TransportBatch } from './transport.js';

/** The knobs a TagBuffer needs; IdmintClient validates and freezes them. */
export interface TagBufferSettings {
  /** IDs asked for per fetch at first; the adaptive size never drops below it. */
  batchSize: number;
  /** Upper bound of the adaptive size (and of one fetch for a large nextMany). */
  maxBatchSize: number;
  /** Fetch the next batch in the background once less than this share of the current one remains. */
  prefetchAt: number;
  /** A batch used up faster than this doubles the size; one lasting over twice this halves it. */
  batchLifeMs: number;
}

/**
 * A fetched batch: a list of IDs (`ids`, read at `pos`), or a block of contiguous segment IDs
 * (`ids` undefined, handed out by incrementing `next` up to `end`: no parsing per ID).
 */
interface Batch {
  readonly ids: bigint[] | undefined;
  /** A formatted tag's IDs as served (`base62`, `sqids`...): handed out as strings only. */
  readonly texts: string[] | undefined;
  pos: number;
  next: number;
  readonly end: number;
  /** IDs in the batch when fetched. */
  readonly total: number;
  /** For a block: once `next` passes this, the next batch is fetched in the background. */
  readonly mark: number;
  /** When the first ID was taken from it; the batch's life is measured from here. */
  startedAt: number | undefined;
}

const left = (b: Batch): number => (b.ids ? b.ids.length - b.pos : b.texts ? b.texts.length - b.pos : b.end - b.next + 1);
const sizeOf = (b: Batch): number => b.total;

export interface TagBufferStats {
  readonly bizTag: string;
  /** IDs ready to hand out without a round trip. */
  readonly buffered: number;
  /** The size the next fetch asks for. */
  readonly batchSize: number;
  readonly fetches: number;
  readonly fetchFailures: number;
  readonly fetching: boolean;
}

const MAX_ID = (1n << 63n) - 1n;
/** Past a block's prefetch mark, the synchronous take checks on the prefetch this often. */
const RETRY_EVERY = 4096;
const MAX_NUMBER = BigInt(Number.MAX_SAFE_INTEGER);
const DECIMAL_ID = /^[1-9][0-9]{0,18}$/;
// A formatted ID (base62, Sqids): letters and digits, as the Kafka contract allows.
const FORMATTED_ID = /^[0-9A-Za-z]{1,32}$/;
// Formats whose IDs are still decimal numbers: `next()` hands them out as bigints.
const DECIMAL_FORMATS: ReadonlySet<string | undefined> = new Set([undefined, 'decimal', 'obfuscated']);

/**
 * The double buffer of one tag: the batch being handed out plus at most one batch fetched
 * ahead, and at most one fetch in flight, shared by every caller. Taking is synchronous, so
 * two callers interleaving at an `await` can never receive the same ID.
 */
export class TagBuffer {
  readonly bizTag: string;
  private readonly batches: Batch[] = [];
  private inflight: Promise<void> | undefined;
  private size: number;
  private fetches = 0;
  private fetchFailures = 0;
  private closed = false;
  // Whether this tag's IDs come as blocks; false once the server said they are not contiguous.
  private blocks: boolean;
  // The block takeNumber hands out from, with its cursor held here while it does: the synchronous
  // take is then one compare and one store on this object. `settle()` writes the cursor back
  // before anything else reads or takes from the batches.
  private active: Batch | undefined;
  private activeNext = 0;
  /** Exclusive: the slow path runs when the cursor reaches it (the prefetch mark, a retry point, the end). */
  private activeStop = 0;

  constructor(
    bizTag: string,
    private readonly transport: IdTransport,
    private readonly settings: Readonly<TagBufferSettings>,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {
    this.bizTag = bizTag;
    this.size = settings.batchSize;
    this.blocks = transport.fetchBlocks !== undefined;
  }

  get buffered(): number {
    this.settle();
    let n = 0;
    for (const b of this.batches) n += left(b);
    return n;
  }

  stats(): TagBufferStats {
    return {
      bizTag: this.bizTag,
      buffered: this.buffered,
      batchSize: this.size,
      fetches: this.fetches,
      fetchFailures: this.fetchFailures,
      fetching: this.inflight !== undefined,
    };
  }

  /** The ID the next take would return, without taking it; undefined when nothing is buffered. */
  peek(): bigint | undefined {
    const b = this.head();
    if (!b) return undefined;
    if (b.texts) throw this.formatted();
    return b.ids ? b.ids[b.pos] : BigInt(b.next);
  }

  /**
   * One buffered ID as a number, or undefined when empty: the synchronous fast path for segment
   * tags (blocks are plain counters). An ID above 2^53 - 1 is refused and stays buffered.
   */
  takeNumber(): number | undefined {
    const id = this.activeNext;
    if (id < this.activeStop) {
      this.activeNext = id + 1;
      return id;
    }
    return this.takeNumberSlow();
  }

  /** takeNumber past the fast path: activates the head block, prefetches, or takes from a list. */
  private takeNumberSlow(): number | undefined {
    const b = this.head(); // settles the active block and retires a used-up one
    if (b && b.ids === undefined && b.texts === undefined) {
      b.startedAt ??= this.clock.now();
      const id = b.next++;
      let stop = b.mark;
      if (id >= b.mark) {
        this.maybePrefetch();
        // Past the mark with the next batch on its way: come back every few thousand takes, so a
        // failed prefetch is retried. Not yet due (or closed): check again at the next take.
        const coming = this.inflight !== undefined || this.batches.length > 1;
        stop = coming ? Math.min(b.end + 1, id + 1 + RETRY_EVERY) : id + 1;
      }
      this.active = b;
      this.activeNext = b.next;
      this.activeStop = Math.min(stop, b.end + 1);
      return id;
    }
    const head = this.peek();
    if (head === undefined) {
      this.maybePrefetch();
      return undefined;
    }
    if (head > MAX_NUMBER) throw this.tooLarge(head);
    return Number(this.takeOne());
  }

  /** Writes the fast path's cursor back to its block. Every path but takeNumber's fast one starts here. */
  private settle(): void {
    const b = this.active;
    if (b === undefined) return;
    b.next = this.activeNext;
    this.active = undefined;
    this.activeNext = 0;
    this.activeStop = 0;
  }

  /** One buffered ID, or undefined when empty: the hot path of `next()`. Never awaits. */
  takeOne(): bigint | undefined {
    const b = this.head();
    let id: bigint | undefined;
    if (b) {
      if (b.texts) throw this.formatted();
      b.startedAt ??= this.clock.now();
      if (b.ids) id = b.ids[b.pos++];
      else {
        id = BigInt(b.next++);
        b.pos++;
      }
      // Retire a used-up batch now, so its life is measured and an empty buffer prefetches.
      if (left(b) === 0) this.head();
    }
    this.maybePrefetch();
    return id;
  }

  /** Moves up to `n` buffered IDs into `into`; returns how many. Never awaits. */
  take(n: number, into: bigint[]): number {
    return this.drain(n, (b, k) => {
      if (b.texts) throw this.formatted();
      if (b.ids) for (let i = 0; i < k; i++) into.push(b.ids[b.pos + i] as bigint);
      else for (let i = 0; i < k; i++) into.push(BigInt(b.next + i));
    });
  }

  /**
   * Writes up to `n` buffered IDs as numbers into `into` from `offset`; returns how many. Never
   * awaits. From a block this is a counter loop; a list batch with an ID above 2^53 - 1 is refused
   * (BAD_REQUEST) before any of its IDs is written, and stays buffered.
   */
  takeNumbers(into: Float64Array | number[], offset: number, n: number): number {
    let at = offset;
    return this.drain(n, (b, k) => {
      if (b.texts) throw this.formatted();
      const ids = b.ids;
      if (ids) {
        for (let i = b.pos; i < b.pos + k; i++) if ((ids[i] as bigint) > MAX_NUMBER) throw this.tooLarge(ids[i] as bigint);
        for (let i = 0; i < k; i++) into[at + i] = Number(ids[b.pos + i]);
      } else fillCount(into, at, b.next, k);
      at += k;
    });
  }

  /**
   * Moves up to `n` buffered IDs into `into` as the strings the server formats them as (a
   * decimal tag's as decimal strings); returns how many. Never awaits.
   */
  takeTexts(n: number, into: string[]): number {
    return this.drain(n, (b, k) => {
      if (b.texts) for (let i = 0; i < k; i++) into.push(b.texts[b.pos + i] as string);
      else if (b.ids) for (let i = 0; i < k; i++) into.push(String(b.ids[b.pos + i]));
      else for (let i = 0; i < k; i++) into.push(String(b.next + i));
    });
  }

  /** Up to `n` IDs batch by batch: `copy` hands out the `k` at each batch's cursor, then the cursor moves. */
  private drain(n: number, copy: (b: Batch, k: number) => void): number {
    let taken = 0;
    while (taken < n) {
      const b = this.head();
      if (!b) break;
      const k = Math.min(n - taken, left(b));
      copy(b, k);
      b.startedAt ??= this.clock.now();
      if (!b.ids && !b.texts) b.next += k;
      b.pos += k;
      taken += k;
    }
    this.head();
    this.maybePrefetch();
    return taken;
  }

  /**
   * Resolves when the fetch in flight (or a new one asking for at least `want` IDs) has landed;
   * rejects with its error. Callers then take again: other callers may have emptied it first.
   */
  fill(want: number): Promise<void> {
    if (this.closed) return Promise.reject(new IdmintError('NOT_READY', 'the idmint client is closed'));
    return this.inflight ?? this.startFetch(Math.min(Math.max(this.size, want), this.settings.maxBatchSize));
  }

  /** Starts the first fetch so the first caller does not wait; failures are logged, and retried on demand. */
  warm(): void {
    if (this.closed || this.inflight || this.batches.length > 0) return;
    this.startFetch(this.size).catch(() => undefined);
  }

  /** Drops what is buffered: those IDs become gaps, never repeats. */
  close(): void {
    this.settle();
    this.closed = true;
    this.batches.length = 0;
  }

  /** The batch to take from, after retiring (and measuring) any used-up one. */
  private head(): Batch | undefined {
    this.settle();
    for (;;) {
      const b = this.batches[0];
      if (!b || left(b) > 0) return b;
      this.batches.shift();
      this.adapt(b);
    }
  }

  private maybePrefetch(): void {
    this.settle();
    if (this.closed || this.inflight || this.batches.length > 1) return;
    const b = this.batches[0];
    if (b && left(b) >= this.settings.prefetchAt * sizeOf(b)) return;
    // Nobody waits on a background fetch: log its failure here; the next empty take retries.
    this.startFetch(this.size).catch((err: unknown) => this.logger.warn({ err, bizTag: this.bizTag }, 'prefetching IDs failed'));
  }

  private startFetch(count: number): Promise<void> {
    this.fetches++;
    const run = (async () => {
      try {
        const answer = await this.fetchBatch(count);
        const batches: Batch[] = answer.blocks
          ? answer.blocks.map((b) => {
              const total = b.end - b.start + 1;
              return {
                ids: undefined,
                texts: undefined,
                pos: 0,
                next: b.start,
                end: b.end,
                total,
                mark: b.end - Math.floor(this.settings.prefetchAt * total),
                startedAt: undefined,
              };
            })
          : [DECIMAL_FORMATS.has(answer.format) ? listBatch(parseIds(this.bizTag, answer.ids)) : textBatch(this.bizTag, answer.ids, answer.format!)];
        if (batches.length === 0) throw new IdmintError('POOL_EMPTY', `the dispenser returned no IDs for "${this.bizTag}"`);
        // Closed while fetching: the IDs are dropped (gaps), never kept for a later client.
        if (!this.closed) this.batches.push(...batches);
        this.logger.debug({ bizTag: this.bizTag, asked: count, blocks: answer.blocks?.length, source: answer.source }, 'fetched a batch');
      } catch (err) {
        this.fetchFailures++;
        throw isIdmintError(err) ? err : notReady(`the transport for "${this.bizTag}"`, err);
      } finally {
        this.inflight = undefined;
      }
    })();
    this.inflight = run;
    return run;
  }

  /** Blocks while the tag's IDs are contiguous (segment tags); lists otherwise, decided by the server's answer. */
  private async fetchBatch(count: number): Promise<TransportBatch> {
    if (this.blocks && this.transport.fetchBlocks) {
      try {
        return await this.transport.fetchBlocks(this.bizTag, count);
      } catch (err) {
        // Not a segment tag, or a server without the blocks route: lists from now on.
        if (!(isIdmintError(err) && err.code === 'BAD_REQUEST')) throw err;
        this.blocks = false;
        this.logger.debug({ bizTag: this.bizTag, reason: err.message }, 'no blocks for this tag; fetching lists');
      }
    }
    return this.transport.fetch(this.bizTag, count);
  }

  private tooLarge(id: bigint): IdmintError {
    return new IdmintError('BAD_REQUEST', `ID ${id} of "${this.bizTag}" exceeds 2^53-1 and cannot be a JS number; use next() for a bigint`);
  }

  private formatted(): IdmintError {
    return new BadRequestError(`"${this.bizTag}" hands out formatted IDs (not decimal numbers): use nextString() or tryNextString()`, 'bizTag');
  }

  /** Leaf's step rule applied to the client: keep a batch lasting about `batchLifeMs`. */
  private adapt(b: Batch): void {
    if (b.startedAt === undefined) return;
    const lived = this.clock.now() - b.startedAt;
    const before = this.size;
    if (lived < this.settings.batchLifeMs) this.size = Math.min(this.size * 2, this.settings.maxBatchSize);
    else if (lived > 2 * this.settings.batchLifeMs) this.size = Math.max(Math.floor(this.size / 2), this.settings.batchSize);
    if (this.size !== before) this.logger.debug({ bizTag: this.bizTag, lived, from: before, to: this.size }, 'batch size adapted');
  }
}

/** `into[at..at+k)` = first, first + 1, ...: the counter loop of the bulk take, kept apart so V8 compiles it alone. */
function fillCount(into: Float64Array | number[], at: number, first: number, k: number): void {
  let id = first;
  const end = at + k;
  for (let i = at; i < end; i++) into[i] = id++;
}

function parseIds(bizTag: string, raw: unknown): bigint[] {
  if (!Array.isArray(raw) || raw.length === 0) {
    throw new IdmintError('POOL_EMPTY', `the dispenser returned no IDs for "${bizTag}"`);
  }
  return raw.map((id) => {
    if (typeof id !== 'string' || !DECIMAL_ID.test(id) || BigInt(id) > MAX_ID) {
      throw new IdmintError('NOT_READY', `the dispenser returned a malformed ID for "${bizTag}": ${JSON.stringify(id)}`, { retriable: false });
    }
    return BigInt(id);
  });
}

function textBatch(bizTag: string, raw: unknown, format: string): Batch {
  if (!Array.isArray(raw) || raw.length === 0) throw new IdmintError('POOL_EMPTY', `the dispenser returned no IDs for "${bizTag}"`);
  for (const id of raw as unknown[]) {
    if (typeof id !== 'string' || !FORMATTED_ID.test(id)) {
      throw new IdmintError('NOT_READY', `the dispenser returned a malformed ${format} ID for "${bizTag}": ${JSON.stringify(id)}`, { retriable: false });
    }
  }
  const texts = raw as string[];
  return { ids: undefined, texts, pos: 0, next: 0, end: -1, total: texts.length, mark: 0, startedAt: undefined };
}

function listBatch(ids: bigint[]): Batch {
  return { ids, texts: undefined, pos: 0, next: 0, end: -1, total: ids.length, mark: 0, startedAt: undefined };
}
