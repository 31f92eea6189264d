import type { BizTag, PoolKind } from './ports.js';

/** A pool kind that names a real pool: `auto` resolved. */
export type ConcretePoolKind = Exclude<PoolKind, 'auto'>;

/**
 * The Redis pool of a segment tag with `pool: "auto"`: a counter of ranges (~0.03 bytes per ID,
 * and IDs leave it as ranges); `redis-list` stays available per tag.
 */
export const DEFAULT_REDIS_POOL = 'redis-counter' as const;

/**
 * Which pool serves a segment tag: the tag's own choice, or for `auto` the deployment's default
 * (DEFAULT_REDIS_POOL when the process has Redis, the in-memory double buffer otherwise). The one place
 * this rule lives: the dispenser, the refill processor and the stats all ask here.
 */
export function poolKindOf(tag: Pick<BizTag, 'pool'>, autoKind: ConcretePoolKind): ConcretePoolKind {
  return tag.pool === 'auto' ? autoKind : tag.pool;
}
