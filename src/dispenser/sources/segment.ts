import type { IdSource, SegmentAllocator } from '../../core/ports.js';
import { silentLogger, type Logger } from '../../core/logger.js';
import { MemoryPool } from './memory.js';

/**
 * Fallback `segment`, the rung below a pool that cannot serve (Redis down): Leaf's segment mode in
 * this process — a segment of the tag's step allocated in Postgres, served from memory, the next
 * one loaded before it runs out — so an outage of the pool costs one allocation per step per
 * process, not one Postgres transaction per request. Its buffers hold fresh segments, never a
 * pool's IDs, so nothing it serves can repeat what a pool served (invariant 3). Answers report
 * `source: "segment"`.
 */
export function segmentSource(allocator: SegmentAllocator, options: { by?: string; logger?: Logger } = {}): IdSource & { close(): Promise<void> } {
  return new MemoryPool({ allocator, name: 'segment', logger: (options.logger ?? silentLogger).child({ rung: 'segment' }), by: options.by });
}
