import type { BizTag, IdSource, SegmentAllocator, TakeContext } from '../../core/ports.js';

/**
 * Fallback `segment`: takes a segment of exactly the missing size straight from the store.
 * One UPDATE per request, so it is slower than a pool but needs nothing but Postgres.
 */
export class DirectSegmentSource implements IdSource {
  readonly name = 'segment' as const;

  constructor(
    private readonly allocator: SegmentAllocator,
    private readonly by?: string,
  ) {}

  async take(tag: BizTag, count: number, context: TakeContext = {}): Promise<string[]> {
    const ids: string[] = [];
    // A segment near max_limit may come back short; keep taking until filled or exhausted (which throws).
    while (ids.length < count) {
      const segment = await this.allocator.allocate(tag.bizTag, count - ids.length, {
        shard: context.shard ?? 0,
        ...(this.by === undefined ? {} : { by: this.by }),
      });
      for (let id = segment.start; id <= segment.end; id++) ids.push(String(id));
    }
    return ids;
  }
}
