import type { Clock, IdSourceName } from './ports.js';
import { systemClock } from './ports.js';

export interface HistoryBucket {
  /** Bucket start, epoch ms. */
  readonly at: number;
  readonly pool: number;
  readonly segment: number;
  readonly snowflake: number;
}

const SOURCES: readonly IdSourceName[] = ['pool', 'segment', 'snowflake'];

/**
 * IDs issued per source over the last minutes, in fixed buckets (a ring: constant memory, O(1)
 * per record). The status page draws it; it is not a metric store (Prometheus is).
 */
export class IssueHistory {
  private readonly counts: Float64Array;
  private readonly starts: Float64Array;

  constructor(
    readonly bucketMs = 10_000,
    readonly buckets = 60,
    private readonly clock: Clock = systemClock,
  ) {
    if (!Number.isInteger(bucketMs) || bucketMs < 1 || !Number.isInteger(buckets) || buckets < 1)
      throw new RangeError('bucketMs and buckets must be positive integers');
    this.counts = new Float64Array(buckets * SOURCES.length);
    this.starts = new Float64Array(buckets).fill(-1);
  }

  record(source: IdSourceName, count: number): void {
    const start = Math.floor(this.clock.now() / this.bucketMs) * this.bucketMs;
    const slot = (start / this.bucketMs) % this.buckets;
    if (this.starts[slot] !== start) {
      this.starts[slot] = start;
      this.counts.fill(0, slot * SOURCES.length, (slot + 1) * SOURCES.length);
    }
    this.counts[slot * SOURCES.length + SOURCES.indexOf(source)]! += count;
  }

  /** The last `buckets` buckets, oldest first, empty ones included (zeros). */
  snapshot(): HistoryBucket[] {
    const newest = Math.floor(this.clock.now() / this.bucketMs) * this.bucketMs;
    const out: HistoryBucket[] = [];
    for (let i = this.buckets - 1; i >= 0; i--) {
      const at = newest - i * this.bucketMs;
      const slot = (at / this.bucketMs) % this.buckets;
      const live = this.starts[slot] === at;
      const count = (k: number): number => (live ? this.counts[slot * SOURCES.length + k]! : 0);
      out.push({ at, pool: count(0), segment: count(1), snowflake: count(2) });
    }
    return out;
  }
}
