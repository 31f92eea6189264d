import { SegmentExhaustedError } from '../../core/errors.js';
import type { ShardedLayout } from '../../core/sharded.js';
import type { BizTag, IdSource, TakeContext } from '../../core/ports.js';

/**
 * Sharded tags: one segment sequence per (tag, shard), encoded as sequence | shard | app.
 * Distinct shards give distinct low bits, so IDs stay unique per tag across shards.
 */
export class ShardedSource implements IdSource {
  readonly name = 'pool' as const;
  private readonly cursor = new Map<string, number>();

  constructor(
    private readonly sequences: IdSource,
    private readonly layout: ShardedLayout,
    private readonly app: number,
  ) {}

  async take(tag: BizTag, count: number, context: TakeContext = {}): Promise<string[]> {
    // Round-robin over the tag's shards unless the caller names one.
    const shard = context.shard ?? this.nextShard(tag);
    const limit = Math.min(this.layout.maxSequence, tag.maxLimit ?? Infinity);
    const ids: string[] = [];
    // A lowered maxLimit leaves sequences above it buffered: drop them (gaps, never handed out)
    // and take again; the store refuses with SEGMENT_EXHAUSTED once nothing is left under it.
    while (ids.length < count) {
      for (const raw of await this.sequences.take(tag, count - ids.length, { ...context, shard })) {
        const sequence = Number(raw);
        if (sequence > this.layout.maxSequence) throw new SegmentExhaustedError(tag.bizTag, this.layout.maxSequence);
        if (sequence <= limit) ids.push(this.layout.encode({ sequence, shard, app: this.app }).toString());
      }
    }
    return ids;
  }

  private nextShard(tag: BizTag): number {
    const next = ((this.cursor.get(tag.bizTag) ?? -1) + 1) % Math.max(1, tag.shards);
    this.cursor.set(tag.bizTag, next);
    return next;
  }
}
