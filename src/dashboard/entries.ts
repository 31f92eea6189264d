/** The dashboard's history entries: what processes write to its store and the page reads. */

/** IDs issued per source, by one process or summed over the deployment's processes. */
export interface IssuedCounts {
  pool: number;
  segment: number;
  snowflake: number;
}

/** A pool's state at one moment: Redis pools from their meta, Kafka pool topics from their group's offsets. */
export interface PoolPoint {
  readonly bizTag: string;
  readonly shard: number;
  readonly kind: string;
  /** IDs ready. */
  readonly depth: number;
  /** Depth the last refill aimed for; null before the first refill. */
  readonly target: number | null;
  /** IDs per second asked of the pool over the demand window. */
  readonly rate: number;
  /** Kafka pool topics: the topic, its consumer group and unconsumed blocks per partition (the group's lag). */
  readonly kafka?: { topic: string; group: string; lagBlocks: number[]; blockIds: number };
}

/** One refill job's result, recorded by the refill worker that ran it. */
export interface RefillEvent {
  /** When the job finished, epoch ms. */
  readonly at: number;
  readonly bizTag: string;
  readonly shard: number;
  /** threshold, cron or manual. */
  readonly reason: string;
  readonly status: 'pushed' | 'skipped' | 'failed';
  /** How long the job ran. */
  readonly ms: number;
  /** Segments taken and the IDs they held (pushed only). */
  readonly segments: number;
  readonly ids: number;
  readonly target?: number;
  readonly depthBefore?: number;
  /** Why it was skipped or failed. */
  readonly why?: string;
  /** The process that ran it. */
  readonly by: string;
}

/** What a process says about itself that does not change. */
export interface ProcessIdentity {
  /** `host:pid`: unique per process, the key of its report and the `by` of its refills. */
  readonly id: string;
  /** `host:port` as the process advertises it (`#index` added for one of IDMINT_PROCESSES): how the page names it. Absent in reports of before. */
  readonly address?: string;
  readonly host: string;
  readonly pid: number;
  readonly roles: string[];
  readonly version: string;
  readonly startedAt: number;
}

/** What one process says about itself every sample interval. */
export interface ProcessReport extends ProcessIdentity {
  /** When this report was made, epoch ms. */
  readonly at: number;
  /** What its /readyz says. */
  readonly status: 'ready' | 'degraded' | 'not_ready';
  readonly checks: Record<string, { ok: boolean; message?: string; hint?: string }>;
  /** When it stopped cleanly (its last report): the page shows it stopped, in grey, not silent. */
  readonly stoppedAt?: number;
  /** IDs it issued since it started, by tag. */
  readonly issued: Record<string, IssuedCounts>;
  /** Kafka pool topics as its refill role sees them. */
  readonly kafka?: PoolPoint[];
}

/** The deployment at one moment, written by one API process per interval. */
export interface Sample {
  readonly at: number;
  readonly pools: PoolPoint[];
  /** IDs issued since start, summed over the processes reporting (a restart resets its share). */
  readonly issued: Record<string, IssuedCounts>;
}
