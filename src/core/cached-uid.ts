/**
 * uid-generator's CachedUidGenerator: a ring buffer of `(maxSequence + 1) << boostPower` IDs,
 * padded a whole second at a time from a counter that borrows future seconds, refilled in the
 * background when fewer than `paddingFactor` % remain. The counter only moves forward, so no
 * ID repeats however takers and padding interleave or the clock steps.
 */
import { IdmintError } from './errors.js';
import { UidGeneratorBase, type UidGeneratorOptions } from './uid.js';
import { checkInteger, defaults, OptionsError, resolveOptions } from './options.js';

/** What the handlers see of the ring. */
export interface RingState {
  readonly size: number;
  /** IDs put so far (monotonic). */
  readonly tail: number;
  /** IDs taken so far (monotonic). */
  readonly cursor: number;
  /** Pads one second into the ring now, synchronously. */
  pad(): void;
}

export interface CachedUidGeneratorOptions extends UidGeneratorOptions {
  /** Ring size is `(maxSequence + 1) << boostPower`. Default 3 (uid-generator). */
  boostPower?: number;
  /** Background padding starts when fewer than this % of the ring remain. Default 50. */
  paddingFactor?: number;
  /** Also pad on this interval (uid-generator's scheduled padding). Default off. */
  scheduleIntervalMs?: number;
  /** Padding stopped because the ring is full. Default: log at debug. */
  onRejectedPut?: (ring: RingState) => void;
  /** A take found the ring empty; after it returns the take is retried once. Default: pad now. */
  onRejectedTake?: (ring: RingState) => void;
}

export const CACHED_UID_DEFAULTS = defaults({ boostPower: 3, paddingFactor: 50 });

/** The default rejected-take policy: pad synchronously, so takers never fail while time bits last. */
export const padOnRejectedTake = (ring: RingState): void => ring.pad();

/** uid-generator's default rejected-take policy: fail the take. */
export const throwOnRejectedTake = (ring: RingState): void => {
  throw new IdmintError('POOL_EMPTY', `uid ring buffer is empty (size ${ring.size}, taken ${ring.cursor}); padding has not caught up`);
};

export class CachedUidGenerator extends UidGeneratorBase {
  readonly bufferSize: number;
  readonly paddingThreshold: number;
  private readonly mask: number;
  private readonly slots: bigint[];
  private readonly perSecond: number;
  private readonly scheduleIntervalMs: number | undefined;
  private readonly onRejectedPut: (ring: RingState) => void;
  private readonly onRejectedTake: (ring: RingState) => void;
  private readonly ring: RingState;
  private tail = 0;
  private cursor = 0;
  private lastSecond: number;
  private paddingScheduled = false;
  private started = false;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(options: CachedUidGeneratorOptions) {
    super(options, 'cached-uid');
    this.perSecond = this.layout.maxSequence + 1;
    const { boostPower, paddingFactor, scheduleIntervalMs, onRejectedPut, onRejectedTake } = options;
    const o = resolveOptions(
      {
        ...CACHED_UID_DEFAULTS,
        scheduleIntervalMs: undefined as number | undefined,
        onRejectedPut: (ring: RingState) => this.log.debug({ tail: ring.tail, cursor: ring.cursor }, 'uid ring full; padding stopped'),
        onRejectedTake: padOnRejectedTake,
      },
      { boostPower, paddingFactor, scheduleIntervalMs, onRejectedPut, onRejectedTake },
      (s) => {
        checkInteger('CachedUidGenerator', s, 'boostPower', 0, 10);
        if (!Number.isInteger(s.paddingFactor) || s.paddingFactor <= 0 || s.paddingFactor >= 100)
          throw new OptionsError('CachedUidGenerator', 'paddingFactor', `must be an integer from 1 to 99 (a % of the ring), got ${s.paddingFactor}`);
        if (s.scheduleIntervalMs !== undefined && !(s.scheduleIntervalMs > 0))
          throw new OptionsError(
            'CachedUidGenerator',
            'scheduleIntervalMs',
            `must be positive (or left out: no scheduled padding), got ${s.scheduleIntervalMs}`,
          );
        const size = this.perSecond * 2 ** s.boostPower;
        if (size > 2 ** 24)
          throw new OptionsError(
            'CachedUidGenerator',
            'boostPower',
            `makes a ring of ${size} slots (${this.perSecond} IDs a second << ${s.boostPower}), more than 2^24; lower it`,
          );
      },
    );
    this.bufferSize = this.perSecond * 2 ** o.boostPower;
    this.mask = this.bufferSize - 1;
    this.paddingThreshold = Math.floor((this.bufferSize * o.paddingFactor) / 100);
    this.slots = new Array<bigint>(this.bufferSize).fill(0n);
    this.scheduleIntervalMs = o.scheduleIntervalMs;
    this.onRejectedPut = o.onRejectedPut;
    this.onRejectedTake = o.onRejectedTake;
    this.lastSecond = this.layout.deltaAt(this.clock.now()) - 1;
    const tail = (): number => this.tail;
    const cursor = (): number => this.cursor;
    this.ring = Object.freeze({
      size: this.bufferSize,
      get tail() {
        return tail();
      },
      get cursor() {
        return cursor();
      },
      pad: () => this.padSecond(),
    });
  }

  /** Fills the ring and starts scheduled padding. Idempotent. */
  start(): void {
    if (this.closed) throw this.closedError();
    if (this.started) return;
    this.started = true;
    this.padUntilFull();
    if (this.scheduleIntervalMs !== undefined) {
      this.timer = setInterval(() => this.schedulePadding(), this.scheduleIntervalMs);
      this.timer.unref();
    }
  }

  /** Stops padding; later takes throw NOT_READY. Idempotent. */
  close(): void {
    this.closed = true;
    clearInterval(this.timer);
    this.timer = undefined;
    this.cursor = this.tail;
  }

  /** IDs ready in the ring. */
  depth(): number {
    return this.tail - this.cursor;
  }

  getUid(): bigint {
    const c = this.cursor;
    if (c < this.tail) {
      this.cursor = c + 1;
      if (this.tail - c <= this.paddingThreshold && !this.paddingScheduled) this.schedulePadding();
      return this.slots[c & this.mask] as bigint;
    }
    return this.takeRejected();
  }

  private takeRejected(): bigint {
    if (this.closed) throw this.closedError();
    if (!this.started) this.start();
    else this.onRejectedTake(this.ring);
    if (this.cursor < this.tail) return this.getUid();
    throw new IdmintError('POOL_EMPTY', `uid ring buffer is still empty after the rejected-take handler ran`);
  }

  private closedError(): IdmintError {
    return new IdmintError('NOT_READY', 'cached uid generator is closed', { retriable: false });
  }

  /** One second per macrotask, so takers interleave with padding instead of stalling behind it. */
  private schedulePadding(): void {
    if (this.paddingScheduled || this.closed) return;
    this.paddingScheduled = true;
    const step = (): void => {
      try {
        if (this.closed || !this.padIfRoom()) {
          this.paddingScheduled = false;
          return;
        }
        setImmediate(step);
      } catch (err) {
        this.paddingScheduled = false;
        this.log.error({ err }, 'uid ring padding failed');
      }
    };
    setImmediate(step);
  }

  private padUntilFull(): void {
    while (this.padIfRoom());
  }

  /** Pads one second if it fits; false (and the rejected-put hook) when the ring is full. */
  private padIfRoom(): boolean {
    if (this.bufferSize - (this.tail - this.cursor) < this.perSecond) {
      this.onRejectedPut(this.ring);
      return false;
    }
    this.padSecond();
    return true;
  }

  private padSecond(): void {
    if (this.bufferSize - (this.tail - this.cursor) < this.perSecond) return;
    // Borrow the next second, but never fall behind the clock (uid-generator's counter does, leaving IDs stale).
    const second = Math.max(this.lastSecond + 1, this.layout.deltaAt(this.clock.now()));
    if (second > this.layout.maxDelta) throw this.exhausted();
    this.lastSecond = second;
    const base = (BigInt(second) << this.timeShift) | this.fixedBits;
    const { slots, mask, seqTable, perSecond } = this;
    let t = this.tail;
    for (let s = 0; s < perSecond; s++) slots[t++ & mask] = base + (seqTable[s] as bigint);
    this.tail = t;
  }
}
