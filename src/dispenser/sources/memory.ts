import type { Block } from '../../core/block.js';
import { SegmentBuffer } from '../../core/segment-buffer.js';
import type { BizTag, Clock, IdSource, IdSourceName, SegmentAllocator, TakeContext } from '../../core/ports.js';
import { systemClock } from '../../core/ports.js';
import { silentLogger, type Logger } from '../../core/logger.js';
import { checkInteger, defaults, OptionsError, resolveOptions } from '../../core/options.js';

export interface MemoryPoolOptions {
  allocator: SegmentAllocator;
  /** Largest step a buffer may grow to, as a multiple of the tag's base step. Default 100. */
  maxStepFactor?: number;
  /** How long a caller waits for a segment when both halves are empty. Default 3000 ms. */
  waitTimeoutMs?: number;
  clock?: Clock;
  logger?: Logger;
  /** Who allocations are recorded as in the ledger. */
  by?: string;
  /** What answers report as their source: `pool` (the embedded pool) or `segment` (the fallback rung). Default `pool`. */
  name?: Extract<IdSourceName, 'pool' | 'segment'>;
}

export const MEMORY_POOL_DEFAULTS = defaults({ maxStepFactor: 100, waitTimeoutMs: 3000, name: 'pool' as 'pool' | 'segment' });

/**
 * The embedded pool: one Leaf double buffer per tag and shard, in this process's memory.
 * IDs leave the buffer before `take` resolves; a crash loses what is buffered, never repeats it.
 */
export class MemoryPool implements IdSource {
  readonly name: 'pool' | 'segment';
  private readonly buffers = new Map<string, { step: number; buffer: SegmentBuffer }>();
  private readonly options: Readonly<Required<Omit<MemoryPoolOptions, 'by' | 'name'>> & { by: string | undefined }>;

  constructor(options: MemoryPoolOptions) {
    const { name, ...rest } = resolveOptions(
      { ...MEMORY_POOL_DEFAULTS, clock: systemClock, logger: silentLogger, by: undefined as string | undefined },
      options,
      (s) => {
        checkInteger('MemoryPool', s, 'maxStepFactor', 1);
        if (!(s.waitTimeoutMs > 0)) throw new OptionsError('MemoryPool', 'waitTimeoutMs', `must be positive, got ${s.waitTimeoutMs}`);
      },
    );
    this.name = name;
    this.options = rest;
  }

  async take(tag: BizTag, count: number, context: TakeContext = {}): Promise<string[]> {
    const buffer = this.bufferFor(tag, context.shard ?? 0);
    if (count === 1) {
      // The single-ID hot path (Leaf routes): no batch array, no wait when an ID is buffered.
      const id = buffer.tryNext();
      if (id !== undefined) return [String(id)];
    }
    const ids = await buffer.nextBatch(count);
    return ids.map(String);
  }

  async takeBlocks(tag: BizTag, count: number, context: TakeContext = {}): Promise<Block[]> {
    return this.bufferFor(tag, context.shard ?? 0).nextBlocks(count);
  }

  /** IDs ready in memory per tag/shard, for metrics. */
  depths(): Array<{ bizTag: string; shard: number; depth: number }> {
    return [...this.buffers.entries()].map(([key, { buffer }]) => {
      const [bizTag, shard] = splitKey(key);
      return { bizTag, shard, depth: buffer.depth() };
    });
  }

  /** Forgets a tag's buffers (deleted or changed tag); buffered IDs are dropped, never reused. */
  forget(bizTag: string): void {
    for (const [key, { buffer }] of this.buffers) {
      if (splitKey(key)[0] === bizTag) {
        buffer.close();
        this.buffers.delete(key);
      }
    }
  }

  async close(): Promise<void> {
    for (const { buffer } of this.buffers.values()) buffer.close();
    this.buffers.clear();
  }

  private bufferFor(tag: BizTag, shard: number): SegmentBuffer {
    const key = `${tag.bizTag}\u0000${shard}`;
    const existing = this.buffers.get(key);
    const { allocator, clock, logger, waitTimeoutMs, maxStepFactor, by } = this.options;
    if (existing) {
      // A changed base step applies from the next segment (Leaf's rule); buffered IDs stay served.
      if (existing.step !== tag.step) {
        existing.buffer.setStep(tag.step, maxStepFor(tag.step, maxStepFactor));
        existing.step = tag.step;
      }
      return existing.buffer;
    }
    const buffer = new SegmentBuffer({
      bizTag: tag.bizTag,
      baseStep: tag.step,
      maxStep: maxStepFor(tag.step, maxStepFactor),
      allocate: (bizTag, step) => allocator.allocate(bizTag, step, { shard, ...(by === undefined ? {} : { by }) }),
      clock,
      waitTimeoutMs,
      logger: logger.child({ component: 'segment-buffer', bizTag: tag.bizTag, shard }),
    });
    this.buffers.set(key, { step: tag.step, buffer });
    return buffer;
  }
}

function splitKey(key: string): [string, number] {
  const at = key.indexOf('\u0000');
  return [key.slice(0, at), Number(key.slice(at + 1))];
}

function maxStepFor(step: number, factor: number): number {
  return Math.max(step, Math.min(step * factor, 10_000_000));
}
