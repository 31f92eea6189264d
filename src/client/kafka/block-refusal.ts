import type { PoolBlock } from '../../kafka/messages.js';
import { blockBytes, type VerifyKeys } from '../../kafka/signing.js';

/** How far ahead of this host's clock a block's signing time may be (clock skew), ms. */
const FUTURE_SLACK_MS = 3_600_000;

/** Where a pool block was read, and what this reader accepts there. */
export interface BlockPlace {
  namespace: string;
  topic: string;
  partition: number;
  bizTag: string;
  shard: number;
  /** The sequence of the last block this group took from the partition: a block at or below it is a copy. */
  floor: number;
  /** Undefined only with insecureSkipVerify. */
  keys: VerifyKeys | undefined;
  maxBlockAgeMs: number;
}

/** Why a block read from a pool topic must not be served, or undefined when it may be. */
export function blockRefusal(block: PoolBlock | null, place: BlockPlace, now = Date.now()): string | undefined {
  if (!block) return 'malformed';
  if (block.bizTag !== place.bizTag || (block.shard ?? 0) !== place.shard) return 'of another tag or shard';
  const { keys } = place;
  if (keys) {
    if (block.sig === undefined || block.kid === undefined || block.seq === undefined || block.at === undefined) return 'unsigned';
    const signed = {
      namespace: place.namespace,
      topic: place.topic,
      partition: place.partition,
      seq: block.seq,
      at: block.at,
      bizTag: block.bizTag,
      shard: block.shard ?? 0,
      start: block.start,
      end: block.end,
    };
    if (!keys.verify(block.kid, blockBytes(signed), block.sig))
      return keys.kids.includes(block.kid) ? 'badly signed, or signed for another place' : 'signed by an unknown key';
    const age = now - Number(block.at);
    if (age > place.maxBlockAgeMs || age < -FUTURE_SLACK_MS) return 'signed too long ago (or ahead of this clock)';
  }
  const seq = Number(block.seq ?? block.start);
  if (!Number.isSafeInteger(Number(block.end)) || !Number.isSafeInteger(seq)) return 'beyond 2^53';
  // At or below the floor: a copy of a block taken from this partition (or one a refill
  // appended out of order with another's: a gap, never a repeat).
  if (seq <= place.floor) return 'a copy or replay of a block taken already';
  return undefined;
}
