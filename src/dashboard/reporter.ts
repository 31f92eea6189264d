import { withDeadline } from '../core/last-known.js';
import { silentLogger, type Logger } from '../core/logger.js';
import type { ReadinessReport } from '../http/base.js';
import { KafkaPoolReadError } from './pools.js';
import { forgotten, SILENT_INTERVALS } from './processes.js';
import type { DashboardStore, IssuedCounts, PoolPoint, ProcessIdentity, ProcessReport, Sample } from './store.js';

/** What /readyz says. */
export type HealthReport = ReadinessReport;

export interface DashboardReporterOptions {
  store: DashboardStore;
  identity: Omit<ProcessIdentity, 'address'>;
  /** How the page names this process (`host:port`, see ProcessIdentity.address), asked at each report: the port is known once the server listens. */
  address?: (() => string | undefined) | undefined;
  /** What /readyz says. */
  health: () => Promise<HealthReport>;
  /** IDs this process issued since it started, by tag and source. */
  issued: () => Record<string, IssuedCounts>;
  /** Every pool as it is now (Redis pools, or this process's buffers without Redis): written into samples. */
  pools?: (() => Promise<PoolPoint[]>) | undefined;
  /** Kafka pool topics as this process's refill role sees them: put in its reports. */
  kafkaPools?: (() => Promise<PoolPoint[]>) | undefined;
  /** Whether this process writes the deployment's samples (one API process per interval does). */
  sampler: boolean;
  /** Interval between reports and between samples. */
  sampleMs: number;
  /** Run at each tick of a sampler (the page's process): keeps what the page shows during an outage fresh (history, tags). */
  refresh?: (() => Promise<unknown>) | undefined;
  logger?: Logger;
}

export { SILENT_INTERVALS };
/** How long the page waits for this process's readiness checks (a hung server must not hang the page). */
export const HEALTH_TIMEOUT_MS = 2000;
/** How long a stopping process tries to say so. */
const GOODBYE_TIMEOUT_MS = 1000;

/**
 * Every process's part of the dashboard: each interval it writes its own report (health, IDs
 * issued, the Kafka pool topics its refill role sees); an API process also claims the interval
 * and, when it wins, writes the deployment's sample (every pool's depth, target and demand, the
 * IDs issued summed over live processes). One sample per interval, whichever process writes it.
 */
export class DashboardReporter {
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  /** When the Kafka read in flight started (0: none is). */
  private kafkaReading = 0;
  private kafka: PoolPoint[] | undefined;
  private kafkaError: string | undefined;
  private closed = false;
  private readonly log: Logger;

  constructor(private readonly options: DashboardReporterOptions) {
    this.log = (options.logger ?? silentLogger).child({ component: 'dashboard' });
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.tick(), this.options.sampleMs);
    this.timer.unref();
    void this.tick();
  }

  /** Stops reporting and writes a last report saying this process stopped (best effort, bounded): the page shows it grey, not silent. Idempotent. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    if (this.closed) return;
    this.closed = true;
    // A report in flight must not land after the last one.
    await this.ticking;
    const now = Date.now();
    const last: ProcessReport = { ...this.identity(), at: now, status: 'not_ready', checks: {}, issued: this.options.issued(), stoppedAt: now };
    await withDeadline(this.options.store.putReport(last), GOODBYE_TIMEOUT_MS, 'writing the last dashboard report').catch((err: unknown) =>
      this.log.debug({ err: (err as Error).message }, 'the last dashboard report was not written; the process will show as silent'),
    );
  }

  /** This process now (health asked now, bounded): the page shows it even while the store cannot be read. */
  async report(now = Date.now()): Promise<ProcessReport> {
    const health = await withDeadline(this.options.health(), HEALTH_TIMEOUT_MS, 'the readiness checks').catch((err: unknown): HealthReport => ({
      status: 'not_ready',
      checks: { health: { ok: false, message: (err as Error).message } },
    }));
    const checks = { ...health.checks };
    // Kafka pool topics that cannot be read say Kafka is down, whatever the readiness checks say.
    if (this.kafkaError !== undefined && checks.kafka?.ok !== false)
      checks.kafka = { ok: false, message: `the Kafka pool topics cannot be read: ${this.kafkaError}` };
    return { ...this.identity(), at: now, status: health.status, checks, issued: this.options.issued(), ...(this.kafka ? { kafka: this.kafka } : {}) };
  }

  private identity(): ProcessIdentity {
    const address = this.options.address?.();
    return { ...this.options.identity, ...(address ? { address } : {}) };
  }

  /** One interval: this process's report, then the sample if this process wins the interval. A tick still running skips the next. */
  async tick(): Promise<void> {
    if (this.ticking || this.closed) return;
    this.ticking = this.run().finally(() => (this.ticking = undefined));
    return this.ticking;
  }

  private async run(): Promise<void> {
    try {
      this.refreshKafka();
      const now = Date.now();
      const own = await this.report(now);
      const { store, sampleMs } = this.options;
      if (this.closed) return;
      await store.putReport(own);
      if (!this.options.sampler) return;
      await this.options.refresh?.().catch((err: unknown) => this.log.debug({ err: (err as Error).message }, 'dashboard refresh failed'));
      const at = Math.floor(now / sampleMs) * sampleMs;
      if (!(await store.claimSample(at, 2 * sampleMs))) return;
      await store.addSample(await this.sample(now, own));
    } catch (err) {
      // Redis down: the page shows this process's health from memory until it is back.
      this.log.debug({ err: (err as Error).message }, 'dashboard report not written');
    }
  }

  private async sample(now: number, own: ProcessReport): Promise<Sample> {
    const { store, sampleMs } = this.options;
    const live: ProcessReport[] = [];
    for (const r of await store.reports()) {
      if (r.id === own.id) continue;
      if (forgotten(r, now)) await store.dropReport(r.id);
      else if (r.stoppedAt === undefined && now - r.at <= SILENT_INTERVALS * sampleMs) live.push(r);
    }
    live.push(own);
    const issued: Record<string, IssuedCounts> = {};
    for (const r of live) {
      for (const [tag, c] of Object.entries(r.issued)) {
        const sum = (issued[tag] ??= { pool: 0, segment: 0, snowflake: 0 });
        sum.pool += c.pool;
        sum.segment += c.segment;
        sum.snowflake += c.snowflake;
      }
    }
    // Kafka pool topics as the refill process that looked last saw them.
    const kafka = live.filter((r) => r.kafka).sort((a, b) => b.at - a.at)[0]?.kafka ?? [];
    const pools = this.options.pools ? await this.options.pools().catch(() => []) : [];
    return { at: now, pools: [...pools, ...kafka], issued };
  }

  /** Kafka offsets are read beside the tick: a hung broker delays them, not the report (a read that hangs says Kafka is down). */
  private refreshKafka(): void {
    const read = this.options.kafkaPools;
    if (!read) return;
    if (this.kafkaReading) {
      const deadline = Math.max(5000, 2 * this.options.sampleMs);
      if (Date.now() - this.kafkaReading > deadline) this.kafkaError ??= `no answer within ${deadline} ms`;
      return;
    }
    this.kafkaReading = Date.now();
    read()
      .then((points) => {
        this.kafka = points;
        this.kafkaError = undefined;
      })
      .catch((err: unknown) => {
        // Only Kafka itself failing says Kafka is down (the tag list and pool meta come from elsewhere).
        if (err instanceof KafkaPoolReadError) this.kafkaError = err.message;
        this.log.debug({ err: (err as Error).message }, 'Kafka pool topics not read');
      })
      .finally(() => (this.kafkaReading = 0));
  }
}
