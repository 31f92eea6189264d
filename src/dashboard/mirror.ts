import { withDeadline } from '../core/last-known.js';
import type { DashboardLimits, DashboardStore, ProcessReport, RefillEvent, Sample } from './store.js';

/** How long a read or write of the shared store may take before the page answers from memory. */
export const SHARED_TIMEOUT_MS = 1500;
/** How far back a sync reads again: writers' clocks differ, so entries may land a little in the past. */
const RESYNC_MS = 60_000;

/** The history for a page: after a time, oldest first, and whether it came from the shared store. */
export interface HistoryRead {
  readonly samples: Sample[];
  readonly refills: RefillEvent[];
  readonly reports: ProcessReport[];
  /** Why the shared store could not be read: everything above is this process's copy of it. */
  readonly error?: string;
}

/** Entries by time, one per key, the newest `limit` kept. */
class Timeline<T extends { at: number }> {
  private items: T[] = [];
  private readonly keys = new Set<string>();

  constructor(
    private readonly keyOf: (item: T) => string,
    private readonly limit: number,
  ) {}

  add(items: readonly T[]): void {
    let sorted = true;
    for (const item of items) {
      const key = this.keyOf(item);
      if (this.keys.has(key)) continue;
      this.keys.add(key);
      const last = this.items[this.items.length - 1];
      if (last && item.at < last.at) sorted = false;
      this.items.push(item);
    }
    if (!sorted) this.items.sort((a, b) => a.at - b.at);
    if (this.items.length > this.limit) for (const gone of this.items.splice(0, this.items.length - this.limit)) this.keys.delete(this.keyOf(gone));
  }

  since(at: number): T[] {
    return this.items.filter((i) => i.at > at);
  }

  newest(): number | undefined {
    return this.items[this.items.length - 1]?.at;
  }
}

/**
 * The dashboard's history as this process knows it: the shared store (Redis, when the deployment
 * has it) mirrored in memory. Everything read from the shared store, and everything this process
 * writes, is kept here too (bounded by the same limits), so while Redis is down — or when there is
 * none — the page answers from memory with the history as last read, and says so. Writes to the
 * shared store that fail are dropped (the memory keeps them); the reporter goes on sampling.
 */
export class MirroredDashboardStore implements DashboardStore {
  private readonly sampleLine: Timeline<Sample>;
  private readonly refillLine: Timeline<RefillEvent>;
  private readonly reportMap = new Map<string, ProcessReport>();
  private lastClaim = Number.NEGATIVE_INFINITY;
  private failure: string | undefined;
  private readonly timeoutMs: number;

  constructor(private readonly options: { shared?: DashboardStore | undefined; limits: DashboardLimits; historyMs: number; timeoutMs?: number }) {
    this.sampleLine = new Timeline((s) => String(s.at), options.limits.samples);
    this.refillLine = new Timeline((e) => `${e.at}/${e.bizTag}/${e.shard}/${e.by}`, options.limits.refills);
    this.timeoutMs = options.timeoutMs ?? SHARED_TIMEOUT_MS;
  }

  /** Why the shared store failed last, until a read succeeds again; undefined while it answers (or there is none). */
  get error(): string | undefined {
    return this.failure;
  }

  async claimSample(at: number, ttlMs: number): Promise<boolean> {
    const claimed = await this.shared((s) => s.claimSample(at, ttlMs), 'claiming the sample');
    // The shared store cannot be asked: this process samples into its own memory.
    const won = claimed ?? at > this.lastClaim;
    if (won) this.lastClaim = Math.max(this.lastClaim, at);
    return won;
  }

  async addSample(sample: Sample): Promise<void> {
    this.sampleLine.add([sample]);
    await this.shared((s) => s.addSample(sample), 'writing a sample');
  }

  async samples(since: number): Promise<Sample[]> {
    await this.pull({ samples: since });
    return this.sampleLine.since(since);
  }

  async addRefill(event: RefillEvent): Promise<void> {
    this.refillLine.add([event]);
    await this.shared((s) => s.addRefill(event), 'writing a refill');
  }

  async refills(since: number): Promise<RefillEvent[]> {
    await this.pull({ refills: since });
    return this.refillLine.since(since);
  }

  async putReport(report: ProcessReport): Promise<void> {
    this.reportMap.set(report.id, report);
    await this.shared((s) => s.putReport(report), 'writing a report');
  }

  async reports(): Promise<ProcessReport[]> {
    await this.pull({});
    return [...this.reportMap.values()];
  }

  async dropReport(id: string): Promise<void> {
    this.reportMap.delete(id);
    await this.shared((s) => s.dropReport(id), 'dropping a report');
  }

  /** Everything after `since` for a page, from the shared store when it answers, else from memory (with why). */
  async read(since: number): Promise<HistoryRead> {
    const ok = await this.pull({ samples: since, refills: since });
    return {
      samples: this.sampleLine.since(since),
      refills: this.refillLine.since(since),
      reports: [...this.reportMap.values()],
      ...(ok ? {} : { error: this.failure ?? 'unknown error' }),
    };
  }

  /** What memory holds after `since`, without asking the shared store. */
  held(since: number): { samples: Sample[]; refills: RefillEvent[] } {
    return { samples: this.sampleLine.since(since), refills: this.refillLine.since(since) };
  }

  /** Reads what the shared store gained since the newest entries held, so memory stays the deployment's history. */
  async sync(now = Date.now()): Promise<void> {
    const from = (newest: number | undefined) => Math.max(now - this.options.historyMs, (newest ?? 0) - RESYNC_MS);
    await this.pull({ samples: from(this.sampleLine.newest()), refills: from(this.refillLine.newest()) });
  }

  /** Reads the shared store's reports, and its samples and refills after the times given, into memory; false when it failed. */
  private async pull(since: { samples?: number; refills?: number }): Promise<boolean> {
    const shared = this.options.shared;
    if (!shared) return true;
    try {
      const [samples, refills, reports] = await withDeadline(
        Promise.all([
          since.samples === undefined ? [] : shared.samples(since.samples),
          since.refills === undefined ? [] : shared.refills(since.refills),
          shared.reports(),
        ]),
        this.timeoutMs,
        'reading the dashboard history from Redis',
      );
      this.sampleLine.add(samples);
      this.refillLine.add(refills);
      this.reportMap.clear();
      for (const r of reports) this.reportMap.set(r.id, r);
      this.failure = undefined;
      return true;
    } catch (err) {
      this.failure = (err as Error).message;
      return false;
    }
  }

  /** One call to the shared store, bounded; undefined when there is none or it failed (the failure is kept for the page). */
  private async shared<T>(call: (store: DashboardStore) => Promise<T>, what: string): Promise<T | undefined> {
    const shared = this.options.shared;
    if (!shared) return undefined;
    try {
      return await withDeadline(call(shared), this.timeoutMs, `${what} to Redis`);
    } catch (err) {
      this.failure = (err as Error).message;
      return undefined;
    }
  }
}
