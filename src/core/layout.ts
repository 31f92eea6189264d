/**
 * 64-bit ID layouts: sign | time | datacenter | worker | sequence, high to low. The sign bit
 * is always 0 so every ID is a non-negative signed 64-bit integer (Postgres BIGINT, Java long).
 */
import { BadRequestError } from './errors.js';
import { checkInteger, defaults, OptionsError, resolveOptions } from './options.js';
import type { Clock } from './ports.js';
import { systemClock } from './ports.js';

export type TimeUnit = 'ms' | 's';

export interface LayoutOptions {
  /** Shown in logs and decode output. Default `custom`. */
  name?: string;
  timeBits: number;
  /** Optional datacenter/rack bits between time and worker. Default 0. */
  datacenterBits?: number;
  workerBits: number;
  sequenceBits: number;
  /** Start of the time field; must lie in the past. */
  epoch: Date | number | string;
  /** What one tick of the time field is. Default `ms`. */
  timeUnit?: TimeUnit;
}

/** What `encode` takes. `timestamp` is Unix epoch milliseconds (truncated to the layout's unit). */
export interface LayoutFields {
  timestamp: number;
  datacenter?: number;
  worker: number;
  sequence: number;
}

/** What `decode` returns: every field, with time both as Unix ms and as an ISO string. */
export interface DecodedId {
  id: string;
  layout: string;
  time: string;
  timestamp: number;
  /** Ticks since the layout's epoch, as stored in the time bits. */
  delta: number;
  datacenter?: number;
  worker: number;
  sequence: number;
}

const ID_BITS = 63;
const MAX_ID = (1n << 63n) - 1n;
/** Invariant 4: time-based IDs are all ≥ 2^53, so they never meet segment IDs. */
export const MIN_TIME_BASED_ID = 1n << 53n;
const MAX_DATE_MS = 8.64e15;

export const LAYOUT_DEFAULTS = defaults({ name: 'custom', datacenterBits: 0, timeUnit: 'ms' as TimeUnit });

function toEpochMs(epoch: Date | number | string): number {
  const ms = epoch instanceof Date ? epoch.getTime() : typeof epoch === 'number' ? epoch : Date.parse(epoch);
  if (!Number.isSafeInteger(ms)) throw new OptionsError('layout', 'epoch', `must be a valid date (an ISO string, a Date or Unix ms), got ${String(epoch)}`);
  return ms;
}

function checkField(name: string, value: number, max: number): void {
  if (!Number.isSafeInteger(value) || value < 0 || value > max) {
    throw new BadRequestError(`${name} must be an integer in [0, ${max}], got ${value}`, name);
  }
}

/**
 * Parses an ID as it travels (invariant 7: a decimal string) into a bigint in [0, 2^63-1];
 * BAD_REQUEST names the field on anything else.
 */
export function parseId(value: string | number | bigint, field = 'id'): bigint {
  let id: bigint | undefined;
  if (typeof value === 'bigint') id = value;
  else if (typeof value === 'number' && Number.isSafeInteger(value)) id = BigInt(value);
  else if (typeof value === 'string' && /^[0-9]{1,19}$/.test(value)) id = BigInt(value);
  if (id === undefined || id < 0n || id > MAX_ID) {
    throw new BadRequestError(`${field} must be a decimal integer in [0, 2^63-1], got ${JSON.stringify(String(value)).slice(0, 40)}`, field);
  }
  return id;
}

/** A validated, frozen bit split. Generators read the precomputed shifts and masks directly. */
export class Layout {
  readonly name: string;
  readonly timeBits: number;
  readonly datacenterBits: number;
  readonly workerBits: number;
  readonly sequenceBits: number;
  readonly timeUnit: TimeUnit;
  /** Milliseconds per tick of the time field. */
  readonly unitMs: number;
  readonly epochMs: number;
  readonly epoch: Date;
  readonly maxDelta: number;
  readonly maxDatacenterId: number;
  readonly maxWorkerId: number;
  readonly maxSequence: number;
  readonly timeShift: number;
  readonly datacenterShift: number;
  readonly workerShift: number;
  /** First instant whose time bits no longer fit: a generator refuses to start at or after it. */
  readonly exhaustsAt: Date;
  /** First instant at which every ID is ≥ 2^53 (invariant 4): a generator refuses to start before it. */
  readonly safeFrom: Date;

  constructor(options: LayoutOptions, clock: Clock = systemClock) {
    let epochMs = Number.NaN;
    const o = resolveOptions(LAYOUT_DEFAULTS, options, (s) => {
      const invalid = (option: string, what: string) => new OptionsError('layout', option, what);
      // Time ticks must stay safe integers in JS numbers, and a useful layout needs a sequence.
      checkInteger('layout', s, 'timeBits', 1, 53);
      checkInteger('layout', s, 'datacenterBits', 0, 31);
      checkInteger('layout', s, 'workerBits', 0, 31);
      checkInteger('layout', s, 'sequenceBits', 1, 31);
      const sum = s.timeBits + s.datacenterBits + s.workerBits + s.sequenceBits;
      if (sum !== ID_BITS) throw invalid('timeBits', `+ datacenterBits + workerBits + sequenceBits must sum to 63 (plus the sign bit), got ${sum}`);
      if (s.timeUnit !== 'ms' && s.timeUnit !== 's') throw invalid('timeUnit', `must be "ms" or "s", got ${String(s.timeUnit)}`);
      epochMs = toEpochMs(s.epoch);
      if (epochMs >= clock.now()) throw invalid('epoch', `must lie in the past, got ${new Date(epochMs).toISOString()}`);
      // Every instant the time bits can hold must be a valid Date, so decode never loses precision.
      if (epochMs + 2 ** s.timeBits * (s.timeUnit === 'ms' ? 1 : 1000) > MAX_DATE_MS || epochMs < -MAX_DATE_MS) {
        throw invalid(
          'timeBits',
          `(${s.timeBits} bits of ${s.timeUnit} from ${new Date(epochMs).toISOString()}) ends past the last valid date; use fewer time bits`,
        );
      }
    });
    const { datacenterBits, timeUnit } = o;
    const unitMs = timeUnit === 'ms' ? 1 : 1000;
    this.name = o.name;
    this.timeBits = o.timeBits;
    this.datacenterBits = datacenterBits;
    this.workerBits = o.workerBits;
    this.sequenceBits = o.sequenceBits;
    this.timeUnit = timeUnit;
    this.unitMs = unitMs;
    this.epochMs = epochMs;
    this.epoch = new Date(epochMs);
    this.maxDelta = 2 ** o.timeBits - 1;
    this.maxDatacenterId = 2 ** datacenterBits - 1;
    this.maxWorkerId = 2 ** o.workerBits - 1;
    this.maxSequence = 2 ** o.sequenceBits - 1;
    this.workerShift = o.sequenceBits;
    this.datacenterShift = this.workerShift + o.workerBits;
    this.timeShift = this.datacenterShift + datacenterBits;
    this.exhaustsAt = new Date(epochMs + 2 ** o.timeBits * unitMs);
    const safeDelta = this.timeShift >= 53 ? 1 : 2 ** (53 - this.timeShift);
    this.safeFrom = new Date(Math.min(MAX_DATE_MS, epochMs + safeDelta * this.unitMs));
    Object.freeze(this);
  }

  /** Ticks since the epoch for a Unix-ms instant (may be negative or beyond maxDelta; callers check). */
  deltaAt(timestampMs: number): number {
    return Math.floor((timestampMs - this.epochMs) / this.unitMs);
  }

  /** Composes an ID from ticks since the epoch; the hot paths in generators inline this. */
  compose(delta: number, datacenter: number, worker: number, sequence: number): bigint {
    return (
      (BigInt(delta) << BigInt(this.timeShift)) |
      (BigInt(datacenter) << BigInt(this.datacenterShift)) |
      (BigInt(worker) << BigInt(this.workerShift)) |
      BigInt(sequence)
    );
  }

  encode(fields: LayoutFields): bigint {
    if (!Number.isFinite(fields.timestamp)) throw new BadRequestError(`timestamp must be a number of Unix ms, got ${fields.timestamp}`, 'timestamp');
    const delta = this.deltaAt(fields.timestamp);
    if (delta < 0 || delta > this.maxDelta) {
      throw new BadRequestError(
        `timestamp ${new Date(fields.timestamp).toISOString()} is outside layout "${this.name}" (${this.epoch.toISOString()} to ${this.exhaustsAt.toISOString()})`,
        'timestamp',
      );
    }
    const datacenter = fields.datacenter ?? 0;
    checkField('datacenter', datacenter, this.maxDatacenterId);
    checkField('worker', fields.worker, this.maxWorkerId);
    checkField('sequence', fields.sequence, this.maxSequence);
    return this.compose(delta, datacenter, fields.worker, fields.sequence);
  }

  decode(id: bigint): DecodedId {
    if (typeof id !== 'bigint' || id < 0n || id > MAX_ID) {
      throw new BadRequestError(`id must be an integer in [0, 2^63-1], got ${String(id)}`, 'id');
    }
    const delta = Number(id >> BigInt(this.timeShift));
    const timestamp = this.epochMs + delta * this.unitMs;
    const decoded: DecodedId = {
      id: id.toString(),
      layout: this.name,
      time: new Date(timestamp).toISOString(),
      timestamp,
      delta,
      worker: Number((id >> BigInt(this.workerShift)) & BigInt(this.maxWorkerId)),
      sequence: Number(id & BigInt(this.maxSequence)),
    };
    if (this.datacenterBits > 0) decoded.datacenter = Number((id >> BigInt(this.datacenterShift)) & BigInt(this.maxDatacenterId));
    return decoded;
  }

  toJSON(): Record<string, unknown> {
    return {
      name: this.name,
      timeBits: this.timeBits,
      datacenterBits: this.datacenterBits,
      workerBits: this.workerBits,
      sequenceBits: this.sequenceBits,
      timeUnit: this.timeUnit,
      epoch: this.epoch.toISOString(),
      exhaustsAt: this.exhaustsAt.toISOString(),
    };
  }
}

export function createLayout(options: LayoutOptions, clock?: Clock): Layout {
  return new Layout(options, clock);
}

/** Leaf's split: 41 bits of ms since 2010-11-04T01:42:54.657Z (Twitter's epoch), 10 worker, 12 sequence. */
export const LEAF_LAYOUT = createLayout({
  name: 'leaf',
  timeBits: 41,
  workerBits: 10,
  sequenceBits: 12,
  epoch: Date.UTC(2010, 10, 4, 1, 42, 54, 657),
  timeUnit: 'ms',
});

/** uid-generator's epoch (2016-05-20) exhausted its 28-bit seconds on 2024-11-20; ours starts 2025-01-01. */
export const UID_DEFAULT_EPOCH = '2025-01-01T00:00:00.000Z';

/** uid-generator's split: 28 bits of seconds, 22 worker, 13 sequence. Use `createUidLayout` for another epoch. */
export function createUidLayout(epoch: Date | number | string = UID_DEFAULT_EPOCH, clock?: Clock): Layout {
  return createLayout({ name: 'uid', timeBits: 28, workerBits: 22, sequenceBits: 13, epoch, timeUnit: 's' }, clock);
}

export const UID_LAYOUT = createUidLayout();
