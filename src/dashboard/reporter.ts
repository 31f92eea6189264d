import { silentLogger, type Logger } from '../core/logger.js';
import type { ReadinessReport } from '../http/base.js';
import type { DashboardStore, IssuedCounts, PoolPoint, ProcessIdentity, ProcessReport, Sample } from './store.js';

/** What /readyz says. */
export type HealthReport = ReadinessReport;

export interface DashboardReporterOptions {
  store: DashboardStore;
  identity: ProcessIdentity;
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
  logger?: Logger;
}

/** A report older than this many intervals is a silent process; older than FORGET_MS it is forgotten. */
export const SILENT_INTERVALS = 3;
const FORGET_MS = 10 * 60_000;

/**
 * Every process's part of the dashboard: each interval it writes its own report (health, IDs
 * issued, the Kafka pool topics its refill role sees); an API process also claims the interval
 * and, when it wins, writes the deployment's sample (every pool's depth, target and demand, the
 * IDs issued summed over live processes). One sample per interval, whichever process writes it.
 */
export class DashboardReporter {
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;
  private kafkaReading = false;
  private kafka: PoolPoint[] | undefined;
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

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** This process now (health asked now): the page shows it even while the store cannot be read. */
  async report(now = Date.now()): Promise<ProcessReport> {
    const { identity } = this.options;
    const health = await this.options.health().catch((err: unknown): HealthReport => ({ status: 'not_ready', checks: { health: { ok: false, message: (err as Error).message } } }));
    return { ...identity, at: now, status: health.status, checks: health.checks, issued: this.options.issued(), ...(this.kafka ? { kafka: this.kafka } : {}) };
  }

  /** One interval: this process's report, then the sample if this process wins the interval. A tick still running skips the next. */
  async tick(): Promise<void> {
    if (this.ticking) return;
    this.ticking = true;
    try {
      this.refreshKafka();
      const now = Date.now();
      const own = await this.report(now);
      const { store, sampleMs } = this.options;
      await store.putReport(own);
      if (!this.options.sampler) return;
      const at = Math.floor(now / sampleMs) * sampleMs;
      if (!(await store.claimSample(at, 2 * sampleMs))) return;
      await store.addSample(await this.sample(now, own));
    } catch (err) {
      // Redis down: the page shows this process's health from memory until it is back.
      this.log.debug({ err: (err as Error).message }, 'dashboard report not written');
    } finally {
      this.ticking = false;
    }
  }

  private async sample(now: number, own: ProcessReport): Promise<Sample> {
    const { store, sampleMs } = this.options;
    const live: ProcessReport[] = [];
    for (const r of await store.reports()) {
      if (r.id === own.id) continue;
      if (now - r.at > FORGET_MS) await store.dropReport(r.id);
      else if (now - r.at <= SILENT_INTERVALS * sampleMs) live.push(r);
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

  /** Kafka offsets are read beside the tick: a hung broker delays them, not the report. */
  private refreshKafka(): void {
    const read = this.options.kafkaPools;
    if (!read || this.kafkaReading) return;
    this.kafkaReading = true;
    read()
      .then((points) => (this.kafka = points))
      .catch((err: unknown) => this.log.debug({ err: (err as Error).message }, 'Kafka pool topics not read'))
      .finally(() => (this.kafkaReading = false));
  }
}
