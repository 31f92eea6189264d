/** How deep a pool should be: pure, so the sizing rule is testable without servers. */
export interface TargetRule {
  /** Seconds the pool should last at the observed rate. */
  readonly poolSeconds: number;
  /** Smallest target, whatever the rate (the tag's step raises it). */
  readonly minDepth: number;
  /** Largest target, whatever the rate: bounds Redis memory and IDs lost to a flush. */
  readonly maxDepth: number;
}

/** `rate × poolSeconds`, at least one step and `minDepth`, at most `maxDepth`. */
export function targetDepth(ratePerSecond: number, step: number, rule: TargetRule): number {
  const wanted = Math.ceil(Math.max(0, ratePerSecond) * rule.poolSeconds);
  const floor = Math.max(rule.minDepth, step);
  return Math.min(rule.maxDepth, Math.max(floor, wanted));
}
