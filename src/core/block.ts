import { IdmintError } from './errors.js';

/**
 * A block: the contiguous IDs `start..end`, both included. The unit that travels where IDs are
 * contiguous (segments, counter pools), so a million IDs cost two numbers, not a million strings.
 * Segment IDs stay below 2^53, so a block of them is two safe integers.
 */
export interface Block {
  readonly start: number;
  readonly end: number;
}

/** IDs in a block. */
export function blockSize(block: Block): number {
  return block.end - block.start + 1;
}

/** IDs in a list of blocks. */
export function blocksSize(blocks: readonly Block[]): number {
  let n = 0;
  for (const b of blocks) n += blockSize(b);
  return n;
}

/**
 * Appends the range to the list, merging it into the last block when it continues it; keeps
 * lists short when consecutive segments or single IDs arrive in order.
 */
export function appendRange(blocks: Block[], start: number, end: number): void {
  const last = blocks[blocks.length - 1];
  if (last && last.end + 1 === start) blocks[blocks.length - 1] = { start: last.start, end };
  else blocks.push({ start, end });
}

/** Runs of consecutive IDs in a list of decimal IDs (in their order), for sources that hand out lists. */
export function blocksOf(ids: readonly string[]): Block[] {
  const blocks: Block[] = [];
  for (const id of ids) {
    const n = Number(id);
    // Past 2^53 a number rounds: two IDs would become one. Never a block of those.
    if (!Number.isSafeInteger(n)) throw new IdmintError('BAD_REQUEST', `ID ${id} is above 2^53 - 1 and cannot travel in a block; ask for a list of IDs`);
    appendRange(blocks, n, n);
  }
  return blocks;
}

/** Every ID of the blocks as decimal strings, in order. */
export function idsOf(blocks: readonly Block[]): string[] {
  const ids: string[] = [];
  for (const { start, end } of blocks) for (let id = start; id <= end; id++) ids.push(String(id));
  return ids;
}

/**
 * Moves the first `n` IDs of `queue` (blocks in order) into `into`, splitting a block when `n`
 * ends inside it; the queue keeps the rest. Returns how many moved (fewer when the queue runs out).
 */
export function takeFromBlocks(queue: Block[], n: number, into: Block[]): number {
  let moved = 0;
  while (moved < n && queue.length > 0) {
    const head = queue[0]!;
    const want = n - moved;
    const size = blockSize(head);
    if (size <= want) {
      into.push(head);
      queue.shift();
      moved += size;
    } else {
      into.push({ start: head.start, end: head.start + want - 1 });
      queue[0] = { start: head.start + want, end: head.end };
      moved += want;
    }
  }
  return moved;
}
