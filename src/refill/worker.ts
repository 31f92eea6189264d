import type { ConnectionOptions } from 'node:tls';
import { Queue, UnrecoverableError, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { dependencyOf, isIdmintError, TimeoutError } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/logger.js';
import type { RefillProcessor } from './processor.js';
import { REFILL_QUEUE_DEFAULTS } from './queue.js';
import { checkInteger, defaults, resolveOptions } from '../core/options.js';
import { redisHandle, type RedisHandle } from '../redis/handle.js';
import { Episode, type Dependency } from '../core/episode.js';
import { bullTelemetry } from '../tracing/bullmq.js';

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

/** How often the refill worker checks that BullMQ's loop is still running and taking jobs. */
const WATCHDOG_MS = 2000;
/** A worker that took no job for this long while jobs wait is stuck. */
const STUCK_MS = 5000;

type Settings = Required<Omit<RefillWorkerOptions, 'connection' | 'tls' | 'processor' | 'logger'>>;

export const REFILL_WORKER_DEFAULTS = defaults<Settings>({
  name: REFILL_QUEUE_DEFAULTS.name,
  prefix: REFILL_QUEUE_DEFAULTS.prefix,
  concurrency: 2,
  lockDurationMs: 30_000,
  stalledIntervalMs: 30_000,
});

/** The consumer side: a BullMQ worker running the refill processor. */
export class RefillWorker {
  readonly settings: Readonly<Settings>;
  private bull: Worker;
  /** Jobs running in this worker, and when it last started or ended one (or found the queue empty). */
  private active = 0;
  private lastProgress = Date.now();
  private checking = false;
  private readonly counts: Queue;
  private readonly connection: RedisHandle;
  private readonly log: Logger;
  private closing: Promise<void> | undefined;
  /** Paused on purpose (`pause`): the watchdog leaves it so. */
  private held = false;
  /** The last failed refill, while refills fail (cleared by the next that completes). */
  private lastFailure: { at: number; reason: string; dependency: Dependency | undefined } | undefined;
  private readonly failing: Episode;
  /** Told when Redis answers again after an outage (the role sweeps at once: pools fill as soon as they can). */
  onRedisBack: (() => void) | undefined;
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
    const outage = new Episode(this.log, 'refill worker cannot reach Redis', { dependency: 'redis' });
    client.on('error', (err: Error) => outage.fail({}, err.message));
    client.on('ready', () => {
      if (outage.active) this.onRedisBack?.();
      outage.recover();
    });
    // While Postgres or a sink is down every attempt fails: one episode, not a warn per attempt.
    const failing = new Episode(this.log, 'refill jobs failing');
    this.failing = failing;
    const telemetry = bullTelemetry();
    const start = (): Worker => {
      const worker = new Worker(s.name, run, {
        connection: client,
        prefix: s.prefix,
        concurrency: s.concurrency,
        lockDuration: s.lockDurationMs,
        stalledInterval: s.stalledIntervalMs,
        autorun: true,
        ...(telemetry ? { telemetry } : {}),
      });
      worker.on('error', (err) => outage.fail({}, err.message));
      worker.on('active', () => this.progress(+1));
      worker.on('failed', (job, err) => {
        this.progress(-1);
        const dependency = dependencyOf(err);
        this.lastFailure = { at: Date.now(), reason: err.message, dependency };
        failing.fail({ jobId: job?.id, name: job?.name, data: job?.data, attemptsMade: job?.attemptsMade }, err.message, dependency);
      });
      worker.on('completed', () => {
        this.progress(-1);
        this.lastFailure = undefined;
        failing.recover();
      });
      worker.on('drained', () => this.progress(0));
      return worker;
    };
    this.bull = start();
    // Only for its job counts: a Queue on the same client opens no connection of its own.
    this.counts = new Queue(s.name, { connection: client, prefix: s.prefix });
    // Without a listener BullMQ prints each connection error's stack to stderr, past the logger.
    this.counts.on('error', (err) => outage.fail({}, err.message));
    this.watchdog = setInterval(() => {
      if (this.closing || this.held || this.bull.isPaused()) return;
      // BullMQ's loop can end on a connection error and stay stopped after Redis comes back
      // (taskforcesh/bullmq#648, #2466): pools would then never be refilled. Start it again.
      if (!this.bull.isRunning()) {
        this.log.warn('the refill worker had stopped taking jobs; starting it again');
        this.bull.run().catch((err: Error) => outage.fail({}, err.message));
        return;
      }
      // Or the loop runs but waits forever: on a Redis Cluster, after a primary failed, BullMQ's
      // own watchdog for its blocking read (bullmq 6.7) can hang disconnecting the blocking
      // client, and the worker takes no job again while jobs (the sweeps, thresholds) wait.
      // Then a new worker (a new blocking connection) takes over; the old one is abandoned.
      if (this.active > 0 || Date.now() - this.lastProgress < STUCK_MS || this.checking) return;
      this.checking = true;
      void this.waiting()
        .then((waiting) => {
          if (waiting === 0 || this.closing) return void (this.lastProgress = Date.now());
          this.log.warn({ waiting, idleMs: Date.now() - this.lastProgress }, 'the refill worker took no job while jobs wait; replacing it');
          const stuck = this.bull;
          this.bull = start();
          this.lastProgress = Date.now();
          void stuck.close(true).catch(() => undefined);
        })
        .catch((err: Error) => this.log.debug({ err: err.message }, 'refill worker check: Redis did not answer'))
        .finally(() => (this.checking = false));
    }, WATCHDOG_MS);
    this.watchdog.unref();
  }

  /** A job started (+1), ended (-1), or the queue was found empty (0): the worker is alive. */
  private progress(delta: number): void {
    this.active = Math.max(0, this.active + delta);
    this.lastProgress = Date.now();
  }

  /** Jobs waiting to be taken (BullMQ's wait list and prioritized set), within 2 s. */
  private async waiting(): Promise<number> {
    const counts = this.counts.getJobCounts('wait', 'prioritized').then((c) => (c.wait ?? 0) + (c.prioritized ?? 0));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new TimeoutError('counting the waiting refill jobs', 2000)), 2000)));
    try {
      return await Promise.race([counts, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Takes no new job until `resume` (a job under way finishes): this process may not refill now.
   * Idempotent; `reason` is logged once.
   */
  /**
   * For /readyz: whether this worker can refill now. Not while it cannot reach Redis, nor while
   * its last refills failed, unless the server they failed on (`isBack` says) answers again: the
   * next refill will tell, and readiness need not wait for it.
   */
  health(isBack: (dependency: Dependency) => boolean): { ok: boolean; message?: string } {
    const status = this.connection.client.status;
    if (status !== 'ready') return { ok: false, message: `the refill worker cannot reach Redis (${status})` };
    const last = this.lastFailure;
    if (!this.failing.active || !last) return { ok: true };
    if (last.dependency !== undefined && isBack(last.dependency))
      return { ok: true, message: `the last refill failed while ${last.dependency} was down; it answers again` };
    return { ok: false, message: `refills have been failing for ${Math.round(this.failing.lengthMs / 1000)} s: ${last.reason}` };
  }

  pause(reason: string): void {
    if (this.held || this.closing) return;
    this.held = true;
    this.log.warn({ reason }, 'the refill worker takes no job while this process may not allocate segments; other refill workers fill the pools');
    this.bull.pause(true).catch((err: Error) => this.log.debug({ err: err.message }, 'pausing the refill worker failed'));
  }

  /** Takes jobs again after `pause`. Idempotent. */
  resume(): void {
    if (!this.held || this.closing) return;
    this.held = false;
    this.bull.resume();
    this.lastProgress = Date.now();
    this.log.info('the refill worker takes jobs again');
  }

  /** The BullMQ worker taking jobs now (the watchdog replaces a stuck one). */
  get worker(): Worker {
    return this.bull;
  }

  /** Resolves once the worker is connected and waiting for jobs. */
  async waitUntilReady(): Promise<void> {
    await this.bull.waitUntilReady();
  }

  /** Waits for running jobs to finish (or `force` to abandon them to the stall checker). */
  close(force = false): Promise<void> {
    this.closing ??= (async () => {
      clearInterval(this.watchdog);
      await this.bull.close(force);
      await this.counts.close();
      await this.connection.close();
    })();
    return this.closing;
  }
}
