/**
 * uid-generator's DefaultUidGenerator: seconds | worker | sequence. A clock step back throws
 * (seconds are too coarse to wait out); sequence overflow waits for the next second.
 */
import { ClockBackwardsError, IdmintError } from './errors.js';
import type { Layout } from './layout.js';
import { UID_LAYOUT } from './layout.js';
import { assertIdInRange, assertLayoutUsable, layoutExhausted, sleepSync } from './snowflake.js';
import type { Clock } from './ports.js';
import { systemClock } from './ports.js';
import { silentLogger, type Logger } from './logger.js';
import { defaults, resolveOptions } from './options.js';

export interface UidGeneratorOptions {
  /** In [0, layout.maxWorkerId]. uid-generator assumes a fresh worker id per start (see WORKER_NODE). */
  workerId: number;
  /** Datacenter/rack id for layouts with datacenter bits. Default 0. */
  datacenterId?: number;
  /** Default UID_LAYOUT (28 s / 22 worker / 13 sequence, epoch 2025-01-01). */
  layout?: Layout;
  /** Default the system clock. */
  clock?: Clock;
  /** Blocks the thread while waiting for the next second. Default Atomics.wait. */
  sleep?: (ms: number) => void;
  logger?: Logger;
}

export const UID_DEFAULTS = defaults({ datacenterId: 0 });

/** Shared set-up of the two uid generators: validated ids, the fixed bits, a bigint per sequence. */
export abstract class UidGeneratorBase {
  readonly layout: Layout;
  readonly workerId: number;
  readonly datacenterId: number;
  protected readonly clock: Clock;
  protected readonly sleep: (ms: number) => void;
  protected readonly log: Logger;
  protected readonly timeShift: bigint;
  protected readonly fixedBits: bigint;
  protected readonly seqTable: bigint[];

  constructor(options: UidGeneratorOptions, component: string) {
    const o = resolveOptions({ ...UID_DEFAULTS, layout: UID_LAYOUT, clock: systemClock, sleep: sleepSync, logger: silentLogger }, options, (s) => {
      assertIdInRange('workerId', s.workerId, s.layout.maxWorkerId);
      assertIdInRange('datacenterId', s.datacenterId, s.layout.maxDatacenterId);
    });
    const layout = o.layout;
    this.layout = layout;
    this.workerId = o.workerId;
    this.datacenterId = o.datacenterId;
    this.clock = o.clock;
    this.sleep = o.sleep;
    this.log = o.logger.child({ component });
    assertLayoutUsable(layout, this.clock.now(), this.log);
    this.timeShift = BigInt(layout.timeShift);
    this.fixedBits = (BigInt(o.datacenterId) << BigInt(layout.datacenterShift)) | (BigInt(o.workerId) << BigInt(layout.workerShift));
    this.seqTable = Array.from({ length: layout.maxSequence + 1 }, (_, i) => BigInt(i));
  }

  abstract getUid(): bigint;

  getUids(n: number): bigint[] {
    if (!Number.isSafeInteger(n) || n < 0) throw new IdmintError('BAD_REQUEST', `count must be a non-negative integer, got ${n}`);
    const out = new Array<bigint>(n);
    for (let i = 0; i < n; i++) out[i] = this.getUid();
    return out;
  }

  /** uid-generator's parseUID: every field, time as ISO. */
  parseUid(uid: bigint): ReturnType<Layout['decode']> {
    return this.layout.decode(uid);
  }

  protected exhausted(): IdmintError {
    return layoutExhausted(this.layout);
  }
}

export class DefaultUidGenerator extends UidGeneratorBase {
  private lastSecond = -1;
  private lastMs = -Infinity;
  private sequence = 0;
  private base = 0n;

  constructor(options: UidGeneratorOptions) {
    super(options, 'uid');
  }

  getUid(): bigint {
    const now = this.clock.now();
    const second = this.layout.deltaAt(now);
    if (second < this.lastSecond) throw new ClockBackwardsError(this.lastMs, now);
    if (second === this.lastSecond) {
      if (this.sequence < this.layout.maxSequence) {
        this.sequence += 1;
      } else {
        // Never wrap inside one second: wait for the next one.
        this.startSecond(this.waitNextSecond());
      }
    } else {
      this.lastMs = now;
      this.startSecond(second);
    }
    return this.base + (this.seqTable[this.sequence] as bigint);
  }

  private startSecond(second: number): void {
    if (second > this.layout.maxDelta) throw this.exhausted();
    this.lastSecond = second;
    this.sequence = 0;
    this.base = (BigInt(second) << this.timeShift) | this.fixedBits;
  }

  private waitNextSecond(): number {
    for (;;) {
      const now = this.clock.now();
      const second = this.layout.deltaAt(now);
      if (second > this.lastSecond) {
        this.lastMs = now;
        return second;
      }
      if (now < this.lastMs) throw new ClockBackwardsError(this.lastMs, now);
      this.sleep(Math.max(1, this.layout.epochMs + (this.lastSecond + 1) * this.layout.unitMs - now));
    }
  }
}
