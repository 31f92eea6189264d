/**
 * Leaf's segment double buffer: serve IDs from the current segment while the next one loads in
 * the background, so callers wait only when both halves are empty. The step adapts to demand.
 */
import { appendRange, blockSize, blocksSize, type Block } from './block.js';
import { BadRequestError, dependencyOf, IdmintError, SegmentExhaustedError, TimeoutError } from './errors.js';
import type { Clock, Segment } from './ports.js';
import { MAX_SEGMENT_ID, MAX_STEP, systemClock } from './ports.js';
import { silentLogger, type Logger } from './logger.js';
import { Episode } from './episode.js';
import { checkInteger, defaults, OptionsError, resolveOptions } from './options.js';

export interface SegmentBufferOptions {
  bizTag: string;
  /** The tag's step: the first segments use it and the step never shrinks below it. */
  baseStep: number;
  /** Largest step the buffer grows to. Default max(baseStep, 1,000,000), Leaf's MAX_STEP. */
  maxStep?: number;
  /** Takes one fresh segment; each call must return a new range (invariant 3). */
  allocate: (bizTag: string, step: number) => Promise<Segment>;
  /** Used for step durations only; wait timeouts are real timers. Default the system clock. */
  clock?: Clock;
  /** Fraction of the current segment used before the next one loads. Default 0.1 (Leaf). */
  loadAt?: number;
  /** How long a caller waits when both halves are empty before TIMEOUT. Default 3000 ms. */
  waitTimeoutMs?: number;
  /** After a failed background load, how long before the background tries again. Default 1000 ms. */
  retryDelayMs?: number;
  /** Segments lasting less than this double the next step. Default 15 minutes (Leaf). */
  growBelowMs?: number;
  /** Segments lasting more than this halve the next step. Default 30 minutes (Leaf). */
  shrinkAboveMs?: number;
  logger?: Logger;
}

export const SEGMENT_BUFFER_DEFAULTS = defaults({
  loadAt: 0.1,
  waitTimeoutMs: 3000,
  retryDelayMs: 1000,
  growBelowMs: 15 * 60_000,
  shrinkAboveMs: 30 * 60_000,
  leafMaxStep: 1_000_000,
});

type ResolvedOptions = Readonly<Required<Omit<SegmentBufferOptions, 'logger'>>>;

function resolveBufferOptions(options: SegmentBufferOptions): ResolvedOptions {
  const invalid = (option: string, what: string): OptionsError => new OptionsError('segment buffer', option, what);
  const o = resolveOptions(
    { ...SEGMENT_BUFFER_DEFAULTS, clock: systemClock, maxStep: Math.max(options.baseStep, SEGMENT_BUFFER_DEFAULTS.leafMaxStep) },
    options,
    (s) => {
      if (typeof s.bizTag !== 'string' || s.bizTag === '') throw invalid('bizTag', 'is required');
      checkInteger('segment buffer', s, 'baseStep', 1);
      checkInteger('segment buffer', s, 'maxStep', s.baseStep);
      if (typeof s.allocate !== 'function') throw invalid('allocate', 'must be an allocate(bizTag, step) function');
      if (!(s.loadAt >= 0 && s.loadAt < 1)) throw invalid('loadAt', `must be in [0, 1), got ${s.loadAt}`);
      if (!(s.waitTimeoutMs > 0)) throw invalid('waitTimeoutMs', `must be positive, got ${s.waitTimeoutMs}`);
      if (!(s.retryDelayMs >= 0)) throw invalid('retryDelayMs', `must be ≥ 0, got ${s.retryDelayMs}`);
      if (!(s.growBelowMs <= s.shrinkAboveMs)) throw invalid('growBelowMs', 'must not exceed shrinkAboveMs');
    },
  );
  return Object.freeze({
    bizTag: o.bizTag,
    baseStep: o.baseStep,
    maxStep: o.maxStep,
    allocate: o.allocate,
    clock: o.clock,
    loadAt: o.loadAt,
    waitTimeoutMs: o.waitTimeoutMs,
    retryDelayMs: o.retryDelayMs,
    growBelowMs: o.growBelowMs,
    shrinkAboveMs: o.shrinkAboveMs,
  });
}

export class SegmentBuffer {
  private opts: ResolvedOptions;
  private readonly log: Logger;
  /** Allocations failing for a reason we expect (a server down): one episode, not a line per try. */
  private readonly failing: Episode;
  // The current half: the next value to hand out, its inclusive end, and where the next load starts.
  private cur = 1;
  private end = 0;
  private loadMark = Infinity;
  private ready: Segment | null = null;
  private loading: Promise<void> | null = null;
  private currentStep: number;
  private lastAllocAt: number | undefined;
  private retryAt = 0;
  // A tag at its max_limit is told once, not on every request that finds it exhausted.
  private exhaustionLogged = false;
  // Highest ID ever accepted: a segment at or below it would repeat IDs (invariant 1).
  private highWater = 0;
  private closed = false;
  private readonly waiters = new Set<(err: Error) => void>();
  // Ranges a request took and gave back when the tag ran out under it: never handed out, served first.
  private spare: Block[] = [];

  constructor(options: SegmentBufferOptions) {
    this.opts = resolveBufferOptions(options);
    this.currentStep = this.options.baseStep;
    this.log = (options.logger ?? silentLogger).child({ component: 'segment-buffer', bizTag: this.options.bizTag });
    this.failing = new Episode(this.log, 'segment allocations failing', { clock: this.options.clock });
  }

  get options(): ResolvedOptions {
    return this.opts;
  }

  /**
   * A new base step for the tag, applied from the next segment load as Leaf does: the IDs
   * buffered now are still served, so changing the step leaves no gap.
   */
  setStep(baseStep: number, maxStep = Math.max(baseStep, SEGMENT_BUFFER_DEFAULTS.leafMaxStep)): void {
    this.opts = resolveBufferOptions({ ...this.opts, baseStep, maxStep });
    this.currentStep = baseStep;
    this.lastAllocAt = undefined;
  }

  /** The step of the latest successful allocation (the base step before the first). */
  get step(): number {
    return this.currentStep;
  }

  /** IDs ready in both halves, without waiting. */
  depth(): number {
    const current = Math.max(0, this.end - this.cur + 1);
    return current + blocksSize(this.spare) + (this.ready ? this.ready.end - this.ready.start + 1 : 0);
  }

  /** The sync fast path: an ID when one is in memory, else undefined (and a load is started). */
  tryNext(): number | undefined {
    const v = this.cur;
    if (v <= this.end) {
      this.cur = v + 1;
      if (v >= this.loadMark) this.loadInBackground();
      return v;
    }
    return this.switchAndTake();
  }

  async next(): Promise<number> {
    const v = this.tryNext();
    if (v !== undefined) return v;
    const [id] = await this.nextBatch(1);
    return id as number;
  }

  /**
   * `n` IDs, across segment boundaries. On failure the IDs already taken are dropped (a gap, never
   * a repeat) — except when the tag runs out under max_limit: then they are kept for later
   * requests and the error says how many remain, so a request larger than the rest burns nothing.
   */
  async nextBatch(n: number): Promise<number[]> {
    if (!Number.isSafeInteger(n) || n < 0) throw new BadRequestError(`count must be a non-negative integer, got ${n}`, 'count');
    const out: number[] = [];
    try {
      await this.fill(out, n);
    } catch (err) {
      const given: Block[] = [];
      for (const id of out) appendRange(given, id, id);
      throw this.giveBack(err, given);
    }
    return out;
  }

  /**
   * `n` IDs as contiguous blocks (one per segment touched, usually one or two): what the blocks
   * route and the SDK move instead of lists. Same guarantees as nextBatch.
   */
  async nextBlocks(n: number): Promise<Block[]> {
    if (!Number.isSafeInteger(n) || n < 0) throw new BadRequestError(`count must be a non-negative integer, got ${n}`, 'count');
    const blocks: Block[] = [];
    let got = 0;
    const deadline = Date.now() + this.options.waitTimeoutMs;
    try {
      while (got < n) {
        if (this.closed) throw this.closedError();
        const spare = this.spare.pop();
        if (spare) {
          const take = Math.min(n - got, blockSize(spare));
          appendRange(blocks, spare.start, spare.start + take - 1);
          if (take < blockSize(spare)) this.spare.push({ start: spare.start + take, end: spare.end });
          got += take;
          continue;
        }
        const take = this.advance(n - got);
        if (take > 0) {
          appendRange(blocks, this.cur - take, this.cur - 1);
          got += take;
          continue;
        }
        const loading = this.refresh(deadline, n - got);
        if (loading) await loading;
      }
    } catch (err) {
      throw this.giveBack(err, blocks);
    }
    return blocks;
  }

  /** After a failed request: if the tag ran out, its IDs go back to be served later, and the error says how many remain. */
  private giveBack(err: unknown, taken: Block[]): unknown {
    if (!(err instanceof SegmentExhaustedError) || this.closed) return err;
    for (let i = taken.length - 1; i >= 0; i--) this.spare.push(taken[i]!);
    const remaining = this.depth();
    return remaining > 0 ? new SegmentExhaustedError(err.bizTag, err.maxLimit, remaining) : err;
  }

  private takeSpare(): number | undefined {
    const last = this.spare[this.spare.length - 1];
    if (!last) return undefined;
    if (last.start === last.end) this.spare.pop();
    else this.spare[this.spare.length - 1] = { start: last.start + 1, end: last.end };
    return last.start;
  }

  private async fill(out: number[], n: number): Promise<void> {
    const deadline = Date.now() + this.options.waitTimeoutMs;
    while (out.length < n) {
      const spare = this.takeSpare();
      if (spare !== undefined) {
        out.push(spare);
        continue;
      }
      if (this.closed) throw this.closedError();
      const take = this.advance(n - out.length);
      if (take > 0) {
        for (let i = this.cur - take; i < this.cur; i++) out.push(i);
        continue;
      }
      const loading = this.refresh(deadline, n - out.length);
      if (loading) await loading;
    }
  }

  /** Takes up to `max` IDs of the current segment (they end at `cur - 1`); returns how many, 0 when it is used up. */
  private advance(max: number): number {
    const take = Math.min(max, this.end - this.cur + 1);
    if (take <= 0) return 0;
    this.cur += take;
    // A request this segment cannot finish loads its own (sized) segment next: no background load.
    if (take === max && this.cur - 1 >= this.loadMark) this.loadInBackground();
    return take;
  }

  /**
   * The current segment is used up: install the loaded one at once (no await, so a caller keeps
   * its turn), or return the bounded wait for its load.
   */
  private refresh(deadline: number, want: number): Promise<void> | undefined {
    if (!this.ready) return this.waitForLoad(deadline, want);
    this.install(this.ready);
    return undefined;
  }

  /** Stops serving: buffered IDs are dropped and waiting callers get NOT_READY. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.cur = 1;
    this.end = 0;
    this.ready = null;
    this.spare = [];
    const err = this.closedError();
    for (const reject of this.waiters) reject(err);
    this.waiters.clear();
  }

  private closedError(): IdmintError {
    return new IdmintError('NOT_READY', `segment buffer for biz tag "${this.options.bizTag}" is closed`, { retriable: false });
  }

  private switchAndTake(): number | undefined {
    if (this.closed) return undefined;
    const spare = this.takeSpare();
    if (spare !== undefined) return spare;
    if (this.ready) {
      this.install(this.ready);
      return this.tryNext();
    }
    if (this.options.clock.now() >= this.retryAt) this.loadInBackground();
    return undefined;
  }

  private install(segment: Segment): void {
    this.ready = null;
    this.cur = segment.start;
    this.end = segment.end;
    this.loadMark = segment.start + Math.floor((segment.end - segment.start + 1) * this.options.loadAt);
  }

  private loadInBackground(): void {
    // One load at a time, and none while the other half is full.
    if (this.closed || this.loading || this.ready) {
      this.loadMark = Infinity;
      return;
    }
    if (this.options.clock.now() < this.retryAt) return;
    this.loadMark = Infinity;
    // Logged in load(); the next call retries after retryDelayMs, a blocked caller at once.
    this.load().catch(() => undefined);
  }

  /**
   * Allocates the next segment (one at a time, so segments arrive in order). `want`: IDs a waiting
   * request still needs; a request larger than the step (a big block) gets one segment sized to
   * it instead of a round trip per step.
   */
  private load(want = 0): Promise<void> {
    if (this.loading) return this.loading;
    const { clock, allocate, bizTag } = this.options;
    const now = clock.now();
    const adapted = this.adaptStep(now);
    const step = Math.max(adapted, Math.min(want, MAX_STEP));
    const loading = (async () => {
      try {
        const segment = await allocate(bizTag, step);
        this.check(segment);
        // Only successful allocations count for the step, and a big request's size does not.
        this.currentStep = adapted;
        this.lastAllocAt = now;
        if (this.closed) return;
        this.highWater = segment.end;
        this.ready = segment;
        this.failing.recover();
        this.log.debug({ start: segment.start, end: segment.end, step }, 'segment loaded');
      } catch (err) {
        this.retryAt = clock.now() + this.options.retryDelayMs;
        // Re-arm the background trigger, whoever started this load.
        if (!this.closed && this.end >= this.cur) this.loadMark = this.cur;
        // A server down (NOT_READY, TIMEOUT) is expected: one episode without a stack. Anything else is a bug's trace.
        if (err instanceof IdmintError && err.retriable && !(err instanceof SegmentExhaustedError))
          this.failing.fail({ step, code: err.code }, err.message, dependencyOf(err));
        else if (!(err instanceof SegmentExhaustedError)) this.log.warn({ err, step }, 'segment allocation failed');
        else if (!this.exhaustionLogged) {
          this.exhaustionLogged = true;
          this.log.warn({ code: err.code, step }, err.message);
        }
        throw err;
      } finally {
        this.loading = null;
      }
    })();
    this.loading = loading;
    return loading;
  }

  /** Leaf's rule: time since the previous allocation decides the next step. */
  private adaptStep(now: number): number {
    const { baseStep, maxStep, growBelowMs, shrinkAboveMs } = this.options;
    if (this.lastAllocAt === undefined) return this.currentStep;
    const lasted = now - this.lastAllocAt;
    if (lasted < growBelowMs) return Math.min(maxStep, this.currentStep * 2);
    if (lasted > shrinkAboveMs) return Math.max(baseStep, Math.floor(this.currentStep / 2));
    return this.currentStep;
  }

  private check(segment: Segment): void {
    const { start, end } = segment ?? ({} as Segment);
    if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 1 || start > end || end > MAX_SEGMENT_ID) {
      throw new IdmintError('NOT_READY', `allocator returned an invalid segment [${start}, ${end}] for biz tag "${this.options.bizTag}"`, { retriable: false });
    }
    if (start <= this.highWater) {
      throw new IdmintError(
        'NOT_READY',
        `allocator returned segment [${start}, ${end}] for biz tag "${this.options.bizTag}" overlapping IDs up to ${this.highWater} already served; refusing to repeat IDs`,
        {
          retriable: false,
        },
      );
    }
  }

  private async waitForLoad(deadline: number, want: number): Promise<void> {
    const remaining = deadline - Date.now();
    const { waitTimeoutMs, bizTag } = this.options;
    const what = `allocating a segment of ${this.adaptStep(this.options.clock.now())} IDs for biz tag "${bizTag}" (both halves of its buffer are empty)`;
    if (remaining <= 0) throw new TimeoutError(what, waitTimeoutMs);
    const loading = this.load(want);
    let timer: NodeJS.Timeout | undefined;
    let rejectWaiter: ((err: Error) => void) | undefined;
    try {
      await Promise.race([
        loading,
        new Promise<never>((_, reject) => {
          rejectWaiter = reject;
          this.waiters.add(reject);
          timer = setTimeout(() => reject(new TimeoutError(what, waitTimeoutMs)), remaining);
        }),
      ]);
    } finally {
      clearTimeout(timer);
      if (rejectWaiter) this.waiters.delete(rejectWaiter);
    }
  }
}
