import { appendRange, idsOf, type Block } from '../../core/block.js';
import { MAX_STEP, type BizTag, type IdSource, type SegmentAllocator, type TakeContext } from '../../core/ports.js';

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
    return idsOf(await this.takeBlocks(tag, count, context));
  }

  async takeBlocks(tag: BizTag, count: number, context: TakeContext = {}): Promise<Block[]> {
    const blocks: Block[] = [];
    let got = 0;
    // A segment near max_limit may come back short; keep taking until filled or exhausted (which throws).
    while (got < count) {
      const segment = await this.allocator.allocate(tag.bizTag, Math.min(count - got, MAX_STEP), {
        shard: context.shard ?? 0,
        ...(this.by === undefined ? {} : { by: this.by }),
      });
      appendRange(blocks, segment.start, segment.end);
      got += segment.end - segment.start + 1;
    }
    return blocks;
  }
}
