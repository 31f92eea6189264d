import type { ConnectionOptions } from 'node:tls';
import { UnrecoverableError, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { isIdmintError } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/logger.js';
import type { RefillProcessor } from './processor.js';
import { REFILL_QUEUE_DEFAULTS } from './queue.js';
import { checkInteger, resolveOptions } from '../core/options.js';
import { redisHandle, type RedisHandle } from '../redis/handle.js';
import { Episode } from '../core/episode.js';

export interface RefillWorkerOptions {
  /** A Redis URL (clients are created and closed here) or a client the caller owns (needs `maxRetriesPerRequest: null`). */
  connection: string | Redis;
  /** TLS settings for a `rediss://` URL connection. */
  tls?: ConnectionOptions;
  processor: RefillProcessor;
  /** Queue name. Default `idmint-refill`. */
  name?: string;
  /** BullMQ key prefix. Default `bull`. */
  prefix?: string;
  /** Jobs run at once. Default 2. */
  concurrency?: number;
  /** Job lock; a worker silent this long is presumed dead and its job is retried. Default 30000 ms. */
  lockDurationMs?: number;
  /** How often stalled jobs are looked for. Default 30000 ms. */
  stalledIntervalMs?: number;
  logger?: Logger;
}

/** How often the refill worker checks that BullMQ's loop is still running. */
const WATCHDOG_MS = 2000;

type Settings = Required<Omit<RefillWorkerOptions, 'connection' | 'tls' | 'processor' | 'logger'>>;

export const REFILL_WORKER_DEFAULTS: Readonly<Settings> = Object.freeze({
  name: REFILL_QUEUE_DEFAULTS.name,
  prefix: REFILL_QUEUE_DEFAULTS.prefix,
  concurrency: 2,
  lockDurationMs: 30_000,
  stalledIntervalMs: 30_000,
});

/** The consumer side: a BullMQ worker running the refill processor. */
export class RefillWorker {
  readonly settings: Readonly<Settings>;
  readonly worker: Worker;
  private readonly connection: RedisHandle;
  private readonly log: Logger;
  private closing: Promise<void> | undefined;
  private readonly watchdog: NodeJS.Timeout;

  constructor(options: RefillWorkerOptions) {
    const { connection, processor, logger, tls, ...rest } = options;
    const s = resolveOptions<Settings>(REFILL_WORKER_DEFAULTS, rest, (o) => {
      checkInteger('RefillWorker', o, 'concurrency', 1);
      checkInteger('RefillWorker', o, 'lockDurationMs', 100);
      checkInteger('RefillWorker', o, 'stalledIntervalMs', 100);
    });
    this.settings = s;
    this.log = (logger ?? silentLogger).child({ component: 'refill-worker' });
    this.connection = redisHandle(connection, { maxRetriesPerRequest: null, ...(tls ? { tls } : {}) });
    const client = this.connection.client;

    const run = async (job: Job) => {
      try {
        return await processor.process(job);
      } catch (err) {
        // A tag that hit max_limit or was malformed will not get better by retrying.
        if (isIdmintError(err) && !err.retriable && err.code !== 'NOT_READY') throw new UnrecoverableError(`${err.code}: ${err.message}`);
        throw err;
      }
    };
    this.worker = new Worker(s.name, run, {
      connection: client,
      prefix: s.prefix,
      concurrency: s.concurrency,
      lockDuration: s.lockDurationMs,
      stalledInterval: s.stalledIntervalMs,
      autorun: true,
    });
    const outage = new Episode(this.log, 'refill worker cannot reach Redis');
    client.on('error', (err: Error) => outage.fail({}, err.message));
    client.on('ready', () => outage.recover());
    this.worker.on('error', (err) => outage.fail({}, err.message));
    // While Postgres or a sink is down every attempt fails: one episode, not a warn per attempt.
    const failing = new Episode(this.log, 'refill jobs failing');
    this.worker.on('failed', (job, err) => failing.fail({ jobId: job?.id, name: job?.name, data: job?.data, attemptsMade: job?.attemptsMade }, err.message));
    this.worker.on('completed', () => failing.recover());
    // BullMQ's loop can end on a connection error and stay stopped after Redis comes back
    // (taskforcesh/bullmq#648, #2466): pools would then never be refilled. Start it again.
    this.watchdog = setInterval(() => {
      if (this.closing || this.worker.isRunning() || this.worker.isPaused()) return;
      this.log.warn('the refill worker had stopped taking jobs; starting it again');
      this.worker.run().catch((err: Error) => outage.fail({}, err.message));
    }, WATCHDOG_MS);
    this.watchdog.unref();
  }

  /** Resolves once the worker is connected and waiting for jobs. */
  async waitUntilReady(): Promise<void> {
    await this.worker.waitUntilReady();
  }

  /** Waits for running jobs to finish (or `force` to abandon them to the stall checker). */
  close(force = false): Promise<void> {
    this.closing ??= (async () => {
      clearInterval(this.watchdog);
      await this.worker.close(force);
      await this.connection.close();
    })();
    return this.closing;
  }
}
