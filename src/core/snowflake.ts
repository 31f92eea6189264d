/**
 * Leaf's Snowflake generator: time | worker | sequence with a random sequence start per tick,
 * overflow waits for the next tick, and small clock steps back are waited out (invariant 6).
 */
import { ClockBackwardsError, ConfigError, IdmintError } from './errors.js';
import type { Layout } from './layout.js';
import { LEAF_LAYOUT } from './layout.js';
import type { Clock } from './ports.js';
import { systemClock } from './ports.js';
import { silentLogger, type Logger } from './logger.js';
import { defaults, OptionsError, resolveOptions } from './options.js';

export interface SnowflakeOptions {
  /** This process's worker id, in [0, layout.maxWorkerId]. */
  workerId: number;
  /** Datacenter/rack id for layouts with datacenter bits. Default 0. */
  datacenterId?: number;
  /** Default LEAF_LAYOUT. */
  layout?: Layout;
  /** Default the system clock. */
  clock?: Clock;
  /** Returns [0, 1); picks each tick's first sequence. Default Math.random. */
  random?: () => number;
  /** Largest step back waited out; more throws CLOCK_BACKWARDS. Default 5 ms (Leaf). */
  maxBackwardsMs?: number;
  /** Blocks the thread for `ms`; injected so tests can move a fake clock. Default Atomics.wait. */
  sleep?: (ms: number) => void;
  logger?: Logger;
}

export const SNOWFLAKE_DEFAULTS = defaults({
  datacenterId: 0,
  maxBackwardsMs: 5,
  /** Each tick starts its sequence in [0, 100) so low-traffic IDs are not all even (Leaf). */
  randomStartBound: 100,
  /** A layout with less than this left is logged as a warning at start. */
  warnBeforeExhaustionMs: 365 * 24 * 3600_000,
});

const sleepCell = new Int32Array(new SharedArrayBuffer(4));
/** Sleeps without spinning a core; fine on Node's main thread. */
export function sleepSync(ms: number): void {
  if (ms > 0) Atomics.wait(sleepCell, 0, 0, ms);
}

/**
 * Checks a time-based layout against the clock before a generator starts: refuses before
 * `layout.safeFrom` (IDs < 2^53, invariant 4) and at or after `layout.exhaustsAt`; warns within a year.
 */
export function assertLayoutUsable(layout: Layout, now: number, log: Logger): void {
  if (now < layout.safeFrom.getTime()) {
    throw new IdmintError(
      'CLOCK_BACKWARDS',
      `clock reads ${new Date(now).toISOString()}, before ${layout.safeFrom.toISOString()} when layout "${layout.name}" (epoch ${layout.epoch.toISOString()}) yields IDs ≥ 2^53; fix the clock or choose an earlier epoch`,
      { retriable: false, details: { nowMs: now, safeFromMs: layout.safeFrom.getTime() } },
    );
  }
  const left = layout.exhaustsAt.getTime() - now;
  if (left <= 0) throw layoutExhausted(layout);
  if (left < SNOWFLAKE_DEFAULTS.warnBeforeExhaustionMs) {
    log.warn({ layout: layout.name, exhaustsAt: layout.exhaustsAt.toISOString() }, 'ID layout runs out of time bits within a year; plan a new epoch');
  }
}

/** A layout past its last tick: its epoch is the operator's to move, not a caller's mistake. */
export function layoutExhausted(layout: Layout): ConfigError {
  return new ConfigError(
    `layout "${layout.name}" ran out of time bits on ${layout.exhaustsAt.toISOString()}; configure a later epoch or more time bits`,
    'epoch',
    {
      details: { exhaustsAt: layout.exhaustsAt.toISOString() },
    },
  );
}

export function assertIdInRange(name: string, value: number, max: number): void {
  if (!Number.isSafeInteger(value) || value < 0 || value > max) {
    throw new IdmintError('WORKER_ID_UNAVAILABLE', `${name} ${value} does not fit the layout: it must be in [0, ${max}]`, { details: { [name]: value, max } });
  }
}

export class SnowflakeGenerator {
  readonly layout: Layout;
  readonly workerId: number;
  readonly datacenterId: number;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly sleep: (ms: number) => void;
  private readonly maxBackwardsMs: number;
  private readonly startBound: number;
  private readonly maxSequence: number;
  private readonly epochMs: number;
  private readonly msTicks: boolean;
  private readonly timeShift: bigint;
  private readonly fixedBits: bigint;
  // Sequence values as bigints, so the hot path allocates one bigint per ID.
  private readonly seqTable: bigint[];
  private lastMs = -Infinity;
  private lastDelta = -1;
  private sequence = 0;
  private base = 0n;

  constructor(options: SnowflakeOptions) {
    const o = resolveOptions(
      { ...SNOWFLAKE_DEFAULTS, layout: LEAF_LAYOUT, clock: systemClock, random: Math.random, sleep: sleepSync, logger: silentLogger },
      options,
      (s) => {
        assertIdInRange('workerId', s.workerId, s.layout.maxWorkerId);
        assertIdInRange('datacenterId', s.datacenterId, s.layout.maxDatacenterId);
        if (!(s.maxBackwardsMs >= 0))
          throw new OptionsError(
            'SnowflakeGenerator',
            'maxBackwardsMs',
            `must be ≥ 0 (the largest clock step back waited out, default 5), got ${s.maxBackwardsMs}`,
          );
      },
    );
    const { layout, clock, datacenterId } = o;
    const log = o.logger.child({ component: 'snowflake' });
    assertLayoutUsable(layout, clock.now(), log);
    this.layout = layout;
    this.workerId = o.workerId;
    this.datacenterId = datacenterId;
    this.clock = clock;
    this.random = o.random;
    this.sleep = o.sleep;
    this.maxBackwardsMs = o.maxBackwardsMs;
    this.startBound = Math.min(o.randomStartBound, layout.maxSequence + 1);
    this.maxSequence = layout.maxSequence;
    this.epochMs = layout.epochMs;
    this.msTicks = layout.unitMs === 1;
    this.timeShift = BigInt(layout.timeShift);
    this.fixedBits = (BigInt(datacenterId) << BigInt(layout.datacenterShift)) | (BigInt(o.workerId) << BigInt(layout.workerShift));
    this.seqTable = Array.from({ length: layout.maxSequence + 1 }, (_, i) => BigInt(i));
    log.info({ workerId: this.workerId, datacenterId, layout: layout.name }, 'snowflake generator ready');
  }

  nextId(): bigint {
    let now = this.clock.now();
    if (now < this.lastMs) now = this.waitOutBackwards(now);
    const delta = this.msTicks ? now - this.epochMs : this.layout.deltaAt(now);
    if (delta === this.lastDelta) {
      const s = this.sequence + 1;
      if (s > this.maxSequence) {
        // Never wrap inside one tick: that would repeat the tick's first IDs.
        this.startTick(this.tilNextTick());
      } else {
        this.sequence = s;
      }
    } else {
      this.lastMs = now;
      this.startTick(delta);
    }
    return this.base + (this.seqTable[this.sequence] as bigint);
  }

  nextIds(n: number): bigint[] {
    if (!Number.isSafeInteger(n) || n < 0) throw new IdmintError('BAD_REQUEST', `count must be a non-negative integer, got ${n}`);
    const out = new Array<bigint>(n);
    for (let i = 0; i < n; i++) out[i] = this.nextId();
    return out;
  }

  private startTick(delta: number): void {
    if (delta > this.layout.maxDelta) throw layoutExhausted(this.layout);
    this.lastDelta = delta;
    this.sequence = Math.floor(this.random() * this.startBound);
    this.base = (BigInt(delta) << this.timeShift) | this.fixedBits;
  }

  /** Leaf waits twice the offset once, then gives up if the clock is still behind. */
  private waitOutBackwards(now: number): number {
    const offset = this.lastMs - now;
    if (offset > this.maxBackwardsMs) throw new ClockBackwardsError(this.lastMs, now);
    this.sleep(offset * 2);
    const after = this.clock.now();
    if (after < this.lastMs) throw new ClockBackwardsError(this.lastMs, after);
    return after;
  }

  private tilNextTick(): number {
    for (;;) {
      let now = this.clock.now();
      if (now < this.lastMs) now = this.waitOutBackwards(now);
      const delta = this.layout.deltaAt(now);
      if (delta > this.lastDelta) {
        this.lastMs = now;
        return delta;
      }
    }
  }
}
