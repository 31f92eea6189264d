/**
 * The sharded layout: sequence | shard | app, high to low. The sequence comes from a segment
 * per (tag, shard), so IDs stay unique per tag while their low bits name where they belong
 * (database shard, application), as in sharding-aware ID schemes.
 */
import { BadRequestError } from './errors.js';
import { checkInteger, defaults, OptionsError, resolveOptions } from './options.js';

export interface ShardedLayoutOptions {
  /** Default 39, so every sharded ID stays below 2^53 and fits a JS number. At most 49. */
  sequenceBits?: number;
  /** Default 6 (64 shards). */
  shardBits?: number;
  /** Default 8 (256 apps). */
  appBits?: number;
}

export const SHARDED_LAYOUT_DEFAULTS = defaults({ sequenceBits: 39, shardBits: 6, appBits: 8 });

export interface ShardedFields {
  sequence: number;
  shard: number;
  app: number;
}

export interface DecodedShardedId extends ShardedFields {
  id: string;
  layout: 'sharded';
}

function check(name: string, value: number, max: number): void {
  if (!Number.isSafeInteger(value) || value < 0 || value > max) {
    throw new BadRequestError(`${name} must be an integer in [0, ${max}], got ${value}`, name);
  }
}

export class ShardedLayout {
  readonly name = 'sharded';
  readonly sequenceBits: number;
  readonly shardBits: number;
  readonly appBits: number;
  readonly maxSequence: number;
  readonly maxShard: number;
  readonly maxApp: number;

  constructor(options: ShardedLayoutOptions = {}) {
    const o = resolveOptions(SHARDED_LAYOUT_DEFAULTS, options, (s) => {
      checkInteger('sharded layout', s, 'sequenceBits', 1, 49);
      checkInteger('sharded layout', s, 'shardBits', 0, 16);
      checkInteger('sharded layout', s, 'appBits', 0, 16);
      const bits = s.sequenceBits + s.shardBits + s.appBits;
      if (bits > 63) throw new OptionsError('sharded layout', 'sequenceBits', `+ shardBits + appBits must be at most 63, got ${bits}`);
    });
    this.sequenceBits = o.sequenceBits;
    this.shardBits = o.shardBits;
    this.appBits = o.appBits;
    this.maxSequence = 2 ** o.sequenceBits - 1;
    this.maxShard = 2 ** o.shardBits - 1;
    this.maxApp = 2 ** o.appBits - 1;
    Object.freeze(this);
  }

  /** True when every ID of this layout is a safe JS integer, so `encodeNumber` is allowed. */
  get safeAsNumber(): boolean {
    return this.sequenceBits + this.shardBits + this.appBits <= 53;
  }

  encode(fields: ShardedFields): bigint {
    check('sequence', fields.sequence, this.maxSequence);
    check('shard', fields.shard, this.maxShard);
    check('app', fields.app, this.maxApp);
    return (BigInt(fields.sequence) << BigInt(this.shardBits + this.appBits)) | (BigInt(fields.shard) << BigInt(this.appBits)) | BigInt(fields.app);
  }

  /** The same ID as a number; refused when the layout can exceed 2^53-1 (invariant 7). */
  encodeNumber(fields: ShardedFields): number {
    if (!this.safeAsNumber) throw new BadRequestError('sharded layout IDs can exceed 2^53-1; use encode() for a bigint', 'sequenceBits');
    return Number(this.encode(fields));
  }

  decode(id: bigint | number): DecodedShardedId {
    const big = typeof id === 'number' && Number.isSafeInteger(id) ? BigInt(id) : id;
    const width = this.sequenceBits + this.shardBits + this.appBits;
    if (typeof big !== 'bigint' || big < 0n || big >= 1n << BigInt(width)) {
      throw new BadRequestError(`id must be an integer in [0, 2^${width}-1], got ${String(id)}`, 'id');
    }
    return {
      id: big.toString(),
      layout: 'sharded',
      sequence: Number(big >> BigInt(this.shardBits + this.appBits)),
      shard: Number((big >> BigInt(this.appBits)) & BigInt(this.maxShard)),
      app: Number(big & BigInt(this.maxApp)),
    };
  }
}

export function createShardedLayout(options?: ShardedLayoutOptions): ShardedLayout {
  return new ShardedLayout(options);
}

export const SHARDED_LAYOUT = createShardedLayout();
