import type { Span } from '@opentelemetry/api';
import { inSpan } from './tracer.js';

/** Attribute names of idmint's own spans (no semantic convention covers ID dispensing). */
export const ATTR = Object.freeze({
  bizTag: 'idmint.biz_tag',
  count: 'idmint.count',
  as: 'idmint.request.as',
  source: 'idmint.source',
  fallback: 'idmint.fallback',
  poolKind: 'idmint.pool.kind',
  poolError: 'idmint.pool.error',
  taken: 'idmint.taken',
  workerId: 'idmint.worker_id',
  shard: 'idmint.shard',
  segmentStart: 'idmint.segment.start',
  segmentEnd: 'idmint.segment.end',
  fenceMark: 'idmint.fence.mark',
  fenceClaimed: 'idmint.fence.claimed',
  refillReason: 'idmint.refill.reason',
});

/**
 * The dispense span: one per get()/getBlocks(), parent of the source spans. `source` is the rung
 * that answered (`pool`, `segment`, `snowflake`); `idmint.fallback` is set where the ladder was taken.
 */
export function traceDispense<R extends { readonly source: string }>(bizTag: string, count: number, as: string, run: () => Promise<R>): Promise<R> {
  return inSpan('idmint.dispense', { attributes: { [ATTR.bizTag]: bizTag, [ATTR.count]: count, [ATTR.as]: as } }, async (span) => {
    const result = await run();
    span?.setAttribute(ATTR.source, result.source);
    return result;
  });
}

/** What a source span is called: the pool's take, the segment rung's take, or a generator's issue. */
export function takeSpanName(source: string): string {
  return source === 'pool' ? 'idmint.pool.take' : source === 'segment' ? 'idmint.segment.take' : `idmint.${source}.issue`;
}

/** A span around one source's take; `poolKind` names the pool (memory, redis-list...) on the pool rung. */
export function traceTake<T extends { length: number }>(
  source: string,
  bizTag: string,
  count: number,
  poolKind: string | undefined,
  run: () => Promise<T>,
): Promise<T> {
  const attributes = { [ATTR.bizTag]: bizTag, [ATTR.count]: count, [ATTR.source]: source, ...(poolKind ? { [ATTR.poolKind]: poolKind } : {}) };
  return inSpan(takeSpanName(source), { attributes }, async (span: Span | undefined) => {
    const taken = await run();
    span?.setAttribute(ATTR.taken, taken.length);
    return taken;
  });
}
