import type { Cluster, Redis } from 'ioredis';
import type { ZodType } from 'zod';
import { DASHBOARD_SCHEMAS, readEntry } from './schemas.js';
import type { ProcessReport, RefillEvent, Sample } from './entries.js';

export type { IssuedCounts, PoolPoint, ProcessIdentity, ProcessReport, RefillEvent, Sample } from './entries.js';

/**
 * Where the dashboard's history lives: in Redis when the deployment has it (every API process
 * shows the same history, and it survives a restart), in memory otherwise. Bounded both ways.
 */
export interface DashboardStore {
  /** True for the one caller per interval that should write the sample starting at `at`. */
  claimSample(at: number, ttlMs: number): Promise<boolean>;
  addSample(sample: Sample): Promise<void>;
  samples(since: number): Promise<Sample[]>;
  addRefill(event: RefillEvent): Promise<void>;
  refills(since: number): Promise<RefillEvent[]>;
  putReport(report: ProcessReport): Promise<void>;
  reports(): Promise<ProcessReport[]>;
  /** Forgets a report (a process silent too long). */
  dropReport(id: string): Promise<void>;
}

export interface DashboardLimits {
  /** Samples kept. */
  readonly samples: number;
  /** Refill events kept. */
  readonly refills: number;
}

/** History in this process only: the embedded default, or a process without Redis. */
export class MemoryDashboardStore implements DashboardStore {
  private readonly sampleList: Sample[] = [];
  private readonly refillList: RefillEvent[] = [];
  private readonly reportMap = new Map<string, ProcessReport>();
  private lastClaim = Number.NEGATIVE_INFINITY;

  constructor(private readonly limits: DashboardLimits) {}

  async claimSample(at: number, _ttlMs?: number): Promise<boolean> {
    if (at <= this.lastClaim) return false;
    this.lastClaim = at;
    return true;
  }

  async addSample(sample: Sample): Promise<void> {
    push(this.sampleList, sample, this.limits.samples);
  }

  async samples(since: number): Promise<Sample[]> {
    return this.sampleList.filter((s) => s.at > since);
  }

  async addRefill(event: RefillEvent): Promise<void> {
    push(this.refillList, event, this.limits.refills);
  }

  async refills(since: number): Promise<RefillEvent[]> {
    return this.refillList.filter((e) => e.at > since);
  }

  async putReport(report: ProcessReport): Promise<void> {
    this.reportMap.set(report.id, report);
  }

  async reports(): Promise<ProcessReport[]> {
    return [...this.reportMap.values()];
  }

  async dropReport(id: string): Promise<void> {
    this.reportMap.delete(id);
  }
}

function push<T>(list: T[], item: T, limit: number): void {
  list.push(item);
  if (list.length > limit) list.splice(0, list.length - limit);
}

/**
 * History in Redis, shared by every process of the deployment: two capped streams (samples and
 * refill events, XADD MAXLEN) and one hash of process reports. Every command names one key, so a
 * Redis Cluster serves it as it is.
 */
export class RedisDashboardStore implements DashboardStore {
  private readonly keys: { samples: string; refills: string; reports: string; claim: string };

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly limits: DashboardLimits,
    keyPrefix = '',
  ) {
    const base = `${keyPrefix}idmint:dashboard`;
    this.keys = { samples: `${base}:samples`, refills: `${base}:refills`, reports: `${base}:reports`, claim: `${base}:claim` };
  }

  async claimSample(at: number, ttlMs: number): Promise<boolean> {
    return (await this.redis.set(`${this.keys.claim}:${at}`, '1', 'PX', ttlMs, 'NX')) === 'OK';
  }

  async addSample(sample: Sample): Promise<void> {
    await this.redis.xadd(this.keys.samples, 'MAXLEN', '~', this.limits.samples, '*', 'v', JSON.stringify(sample));
  }

  async samples(since: number): Promise<Sample[]> {
    return this.range(this.keys.samples, since, DASHBOARD_SCHEMAS.sample);
  }

  async addRefill(event: RefillEvent): Promise<void> {
    await this.redis.xadd(this.keys.refills, 'MAXLEN', '~', this.limits.refills, '*', 'v', JSON.stringify(event));
  }

  async refills(since: number): Promise<RefillEvent[]> {
    return this.range(this.keys.refills, since, DASHBOARD_SCHEMAS.refill);
  }

  async putReport(report: ProcessReport): Promise<void> {
    await this.redis.hset(this.keys.reports, report.id, JSON.stringify(report));
  }

  async reports(): Promise<ProcessReport[]> {
    return Object.values(await this.redis.hgetall(this.keys.reports)).flatMap((v) => readEntry(DASHBOARD_SCHEMAS.report, v));
  }

  async dropReport(id: string): Promise<void> {
    await this.redis.hdel(this.keys.reports, id);
  }

  /**
   * Entries made after `since`, checked against their schema; others skipped. Stream ids carry
   * Redis's clock and `at` the writer's: the range starts a minute early and `at` decides.
   */
  private async range<T extends { at: number }>(key: string, since: number, schema: ZodType<T>): Promise<T[]> {
    const entries = await this.redis.xrange(key, String(Math.max(0, Math.floor(since) - CLOCK_SKEW_MS)), '+');
    return entries.flatMap(([, fields]) => readEntry(schema, fields[1])).filter((e) => e.at > since);
  }
}

/** How far a writer's clock may be from Redis's. */
const CLOCK_SKEW_MS = 60_000;
