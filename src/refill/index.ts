// Refills: the BullMQ queue (threshold requests, cron sweeps), its worker and the processor.
export { createRefillProcessor, REFILL_PROCESSOR_DEFAULTS } from './processor.js';
export type { RefillProcessor, RefillProcessorOptions, RefillJobData, RefillJobLike, RefillOutcome, SweepOutcome, SinkKind } from './processor.js';
export { RefillQueue, REFILL_QUEUE_DEFAULTS, REFILL_QUEUE_NAME, SWEEP_SCHEDULER_ID } from './queue.js';
export type { RefillQueueOptions } from './queue.js';
export { RefillWorker, REFILL_WORKER_DEFAULTS } from './worker.js';
export type { RefillWorkerOptions } from './worker.js';
export { collectRefillStats } from './stats.js';
export type { PoolStat, RefillStats, RefillStatsOptions } from './stats.js';
export { targetDepth } from './target.js';
export type { TargetRule } from './target.js';
export { refillMetrics } from './metrics.js';
export type { RefillMetrics } from './metrics.js';
