import { Queue, type JobsOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import { silentLogger, type Logger } from '../core/logger.js';
import type { RefillReason, RefillTrigger } from '../core/ports.js';
import type { RefillJobData } from './processor.js';
import { checkInteger, defaults, OptionsError, resolveOptions } from '../core/options.js';
import { redisHandle, type RedisHandle } from '../redis/handle.js';
import { Episode } from '../core/episode.js';
import { bullTelemetry } from '../tracing/bullmq.js';
import { refillJobTracing } from '../tracing/refill.js';

export const REFILL_QUEUE_NAME = 'idmint-refill';
export const SWEEP_SCHEDULER_ID = 'idmint-sweep';

export interface RefillQueueOptions {
  /** A Redis URL (a client is created and closed here) or a client the caller owns. */
  connection: string | Redis;
  /** Queue name. Default `idmint-refill`. */
  name?: string;
  /** BullMQ key prefix. Default `bull`. */
  prefix?: string;
  /** Attempts per refill job; each attempt takes a new segment. Default 5. */
  attempts?: number;
  /** First retry delay, doubled per attempt. Default 500 ms. */
  backoffMs?: number;
  /** Cron sweep interval. Default 30000 ms. */
  sweepEveryMs?: number;
  /** Finished jobs kept for the dashboard. Default 500 completed, 1000 failed. */
  keepCompleted?: number;
  keepFailed?: number;
  logger?: Logger;
}

type Settings = Required<Omit<RefillQueueOptions, 'connection' | 'logger'>>;

export const REFILL_QUEUE_DEFAULTS = defaults<Settings>({
  name: REFILL_QUEUE_NAME,
  prefix: 'bull',
  attempts: 5,
  backoffMs: 500,
  sweepEveryMs: 30_000,
  keepCompleted: 500,
  keepFailed: 1000,
});

/** The producer side of refills: threshold requests (deduplicated per tag/shard) and the sweep scheduler. */
export class RefillQueue implements RefillTrigger {
  readonly queue: Queue;
  readonly settings: Readonly<Settings>;
  private readonly connection: RedisHandle;
  private readonly log: Logger;
  private closing: Promise<void> | undefined;

  constructor(options: RefillQueueOptions) {
    const { connection, logger, ...rest } = options;
    const s = resolveOptions<Settings>(REFILL_QUEUE_DEFAULTS, rest, (o) => {
      checkInteger('RefillQueue', o, 'attempts', 1);
      checkInteger('RefillQueue', o, 'backoffMs', 0);
      checkInteger('RefillQueue', o, 'sweepEveryMs', 100);
      if (!o.name || o.name.includes(':')) throw new OptionsError('RefillQueue', 'name', 'must be non-empty and contain no ":"');
    });
    this.settings = s;
    this.log = (logger ?? silentLogger).child({ component: 'refill-queue' });
    this.connection = redisHandle(connection, { maxRetriesPerRequest: null });
    const client = this.connection.client;
    const telemetry = bullTelemetry();
    this.queue = new Queue(s.name, { connection: client, prefix: s.prefix, ...(telemetry ? { telemetry } : {}) });
    const outage = new Episode(this.log, 'refill queue cannot reach Redis', { dependency: 'redis' });
    client.on('error', (err: Error) => outage.fail({}, err.message));
    client.on('ready', () => outage.recover());
    this.queue.on('error', (err) => outage.fail({}, err.message));
  }

  private jobOptions(): JobsOptions {
    return {
      attempts: this.settings.attempts,
      backoff: { type: 'exponential', delay: this.settings.backoffMs },
      removeOnComplete: this.settings.keepCompleted,
      removeOnFail: this.settings.keepFailed,
    };
  }

  /** At most one refill pending or running per tag/shard: later requests are dropped until it finishes. */
  async requestRefill(bizTag: string, shard: number, reason: RefillReason): Promise<void> {
    const tracing = refillJobTracing();
    const data: RefillJobData = { bizTag, shard, reason, ...tracing.data };
    await this.queue.add('refill', data, { ...this.jobOptions(), deduplication: { id: `${bizTag}/${shard}` }, ...tracing.opts });
  }

  /** Creates or updates the cron sweep (idempotent across processes: one scheduler id). */
  async scheduleSweeps(everyMs: number = this.settings.sweepEveryMs): Promise<void> {
    await this.queue.upsertJobScheduler(
      SWEEP_SCHEDULER_ID,
      { every: everyMs },
      {
        name: 'sweep',
        data: {},
        opts: { attempts: 1, removeOnComplete: this.settings.keepCompleted, removeOnFail: this.settings.keepFailed },
      },
    );
  }

  /** One sweep now (a server came back: the pools fill without waiting for the next scheduled sweep). */
  async sweepNow(): Promise<void> {
    await this.queue.add(
      'sweep',
      {},
      { attempts: 1, removeOnComplete: this.settings.keepCompleted, removeOnFail: this.settings.keepFailed, deduplication: { id: 'sweep-now' } },
    );
  }

  async unscheduleSweeps(): Promise<void> {
    await this.queue.removeJobScheduler(SWEEP_SCHEDULER_ID);
  }

  /** Job counts by state, for /v1/stats and /readyz. */
  async counts(): Promise<Record<string, number>> {
    return this.queue.getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed', 'prioritized');
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.queue.close();
      await this.connection.close();
    })();
    return this.closing;
  }
}
