import { idsOf, takeFromBlocks, type Block } from '../../core/block.js';
import type { BizTag, IdSource, TakeContext } from '../../core/ports.js';

type BlockSource = IdSource & Required<Pick<IdSource, 'takeBlocks'>>;

const noop = (): void => undefined;

/**
 * A small buffer of blocks in this process, in front of a pool that hands out ranges (the Redis
 * counter pool): a request for fewer than `chunk` IDs takes `chunk` more than it needs in one
 * round trip and keeps the rest for the next requests, so single-ID requests do not pay a Redis
 * round trip each. At-most-once still holds: the IDs left Redis before anyone receives them, and
 * a crash only loses what is buffered here (gaps). Larger asks, and asks for a given shard, go
 * straight to the pool. Concurrent misses of one tag share one round trip.
 */
export class LocalBlockBuffer implements IdSource {
  readonly name: IdSource['name'];
  private readonly queues = new Map<string, { blocks: Block[]; filling: Promise<void> | undefined }>();

  constructor(
    private readonly pool: BlockSource,
    /** IDs taken beyond a small ask, kept here. */
    private readonly chunk: number,
  ) {
    this.name = pool.name;
  }

  async take(tag: BizTag, count: number, context: TakeContext = {}): Promise<string[]> {
    if (count === 1 && context.shard === undefined) {
      // The single-ID hot path: one ID off the head block, no block list, no await inside.
      const blocks = this.queues.get(tag.bizTag)?.blocks;
      const head = blocks?.[0];
      if (blocks && head) {
        if (head.start === head.end) blocks.shift();
        else blocks[0] = { start: head.start + 1, end: head.end };
        return [String(head.start)];
      }
    }
    return idsOf(await this.takeBlocks(tag, count, context));
  }

  async takeBlocks(tag: BizTag, count: number, context: TakeContext = {}): Promise<Block[]> {
    if (count >= this.chunk || context.shard !== undefined) return this.pool.takeBlocks(tag, count, context);
    let queue = this.queues.get(tag.bizTag);
    if (!queue) {
      queue = { blocks: [], filling: undefined };
      this.queues.set(tag.bizTag, queue);
    }
    const out: Block[] = [];
    let got = takeFromBlocks(queue.blocks, count, out);
    // One refill at a time per tag: later callers wait for it, then take what it left.
    while (got < count && queue.filling) {
      await queue.filling;
      got += takeFromBlocks(queue.blocks, count - got, out);
    }
    if (got < count) {
      const fill = this.pool.takeBlocks(tag, count - got + this.chunk, context);
      queue.filling = fill.then(noop, noop);
      let taken: Block[];
      try {
        taken = await fill;
      } catch (err) {
        // The buffered part is this caller's: return it short (the dispenser's ladder serves the rest).
        if (got > 0) return out;
        throw err;
      } finally {
        queue.filling = undefined;
      }
      got += takeFromBlocks(taken, count - got, out);
      // What this caller did not need is kept, unless the tag was forgotten meanwhile (gaps).
      if (this.queues.get(tag.bizTag) === queue) queue.blocks.push(...taken);
    }
    return out;
  }

  async forget(bizTag: string): Promise<void> {
    const queue = this.queues.get(bizTag);
    // Emptied in place too: a caller waiting on a refill holds this queue and must find nothing.
    if (queue) queue.blocks.length = 0;
    this.queues.delete(bizTag);
    await this.pool.forget?.(bizTag);
  }

  async close(): Promise<void> {
    for (const queue of this.queues.values()) queue.blocks.length = 0;
    this.queues.clear();
    await this.pool.close?.();
  }
}
