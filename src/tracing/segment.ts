import { SpanKind } from '@opentelemetry/api';
import { ATTR } from './dispense.js';
import { inSpan, tracingOn } from './tracer.js';

interface SegmentLike {
  readonly start: number;
  readonly end: number;
}

/**
 * The allocation of one segment: with a fence, `idmint.segment.allocate` around the Postgres
 * UPDATE and the fence claim (and any discarded or repaired attempts); without one, the UPDATE alone.
 */
export function traceSegmentAllocation<S extends SegmentLike>(bizTag: string, shard: number, step: number, run: () => Promise<S>): Promise<S> {
  if (!tracingOn()) return run();
  return inSpan('idmint.segment.allocate', { attributes: { [ATTR.bizTag]: bizTag, [ATTR.shard]: shard, 'idmint.step': step } }, async (span) => {
    const segment = await run();
    span?.setAttributes({ [ATTR.segmentStart]: segment.start, [ATTR.segmentEnd]: segment.end });
    return segment;
  });
}

/** The Postgres UPDATE that takes a segment: a CLIENT span named by the database conventions. */
export function traceSegmentUpdate<S extends SegmentLike>(bizTag: string, shard: number, run: () => Promise<S>): Promise<S> {
  if (!tracingOn()) return run();
  const attributes = {
    'db.system.name': 'postgresql',
    'db.operation.name': 'UPDATE',
    'db.collection.name': 'idmint_segment',
    [ATTR.bizTag]: bizTag,
    [ATTR.shard]: shard,
  };
  return inSpan('UPDATE idmint_segment', { kind: SpanKind.CLIENT, attributes }, async (span) => {
    const segment = await run();
    span?.setAttributes({ [ATTR.segmentStart]: segment.start, [ATTR.segmentEnd]: segment.end });
    return segment;
  });
}

/** The fence's claim of a segment (ZooKeeper or Postgres): whether it was granted. */
export function traceFenceClaim(bizTag: string, shard: number, mark: number, run: () => Promise<boolean>): Promise<boolean> {
  if (!tracingOn()) return run();
  return inSpan('idmint.fence.claim', { attributes: { [ATTR.bizTag]: bizTag, [ATTR.shard]: shard, [ATTR.fenceMark]: mark } }, async (span) => {
    const claimed = await run();
    span?.setAttribute(ATTR.fenceClaimed, claimed);
    return claimed;
  });
}
