import { MAX_SHARDS } from '../../core/ports.js';
/**
 * Key names of Redis pools. Every key of a tag carries the `{tag}` hash tag, so a tag's keys
 * share one Redis Cluster slot and one Lua script may touch them all. Shard 0 is the unsharded
 * pool: `idmint:{order}:ids`; other shards add their number: `idmint:{order}:3:ids`.
 */

export interface PoolKeys {
  /** List pool: IDs as decimal strings. */
  readonly ids: string;
  /** Counter pool: hash `{cur, last, queued}`. */
  readonly counter: string;
  /** Counter pool: queued ranges `"start-end"`. */
  readonly ranges: string;
  /** Hash: fence (Redis run_id), target depth, demand ring. */
  readonly meta: string;
}

export function poolKeys(prefix: string, bizTag: string, shard: number): PoolKeys {
  const base = shard === 0 ? `${prefix}idmint:{${bizTag}}` : `${prefix}idmint:{${bizTag}}:${shard}`;
  return Object.freeze({ ids: `${base}:ids`, counter: `${base}:counter`, ranges: `${base}:ranges`, meta: `${base}:meta` });
}

/** Every key any shard of a tag may have: all in one slot, so one UNLINK drops them. */
export function allTagKeys(prefix: string, bizTag: string): string[] {
  const keys: string[] = [];
  for (let shard = 0; shard < MAX_SHARDS; shard++) {
    const k = poolKeys(prefix, bizTag, shard);
    keys.push(k.ids, k.counter, k.ranges, k.meta);
  }
  return keys;
}

/** The set of tags the refill processor has filled, so a sweep can find deleted tags' pools. */
export function trackedTagsKey(prefix: string): string {
  return `${prefix}idmint:pools`;
}
