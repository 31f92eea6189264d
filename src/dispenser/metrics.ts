import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { BizStore, IdSourceName, Segment } from '../core/ports.js';
import { isIdmintError } from '../core/errors.js';
import { IssueHistory } from '../core/history.js';

export interface DepthReading {
  bizTag: string;
  shard: number;
  depth: number;
}

/**
 * The dispenser's Prometheus metrics, on an injected registry (one per process, or one per
 * test). Transports and pools register their own metrics on the same registry.
 */
export class DispenserMetrics {
  readonly registry: Registry;
  readonly issued: Counter<'biz_tag' | 'source'>;
  readonly requests: Counter<'biz_tag' | 'source'>;
  readonly errors: Counter<'code'>;
  readonly allocations: Counter<'biz_tag'>;
  readonly rewinds: Counter<'biz_tag'>;
  readonly allocationSeconds: Histogram<'biz_tag'>;
  readonly bufferDepth: Gauge<'biz_tag' | 'shard'>;
  /** Read at scrape time for idmint_buffer_depth. */
  depthSource: (() => DepthReading[]) | undefined;
  /** IDs per source over the last ten minutes, for the status page. */
  readonly history = new IssueHistory();
  // IDs issued since start, by tag and source (the dashboard's reports).
  private readonly totals = new Map<string, Record<IdSourceName, number>>();
  // Counts not yet in the counters, by tag, then source.
  private readonly pending = new Map<string, Map<IdSourceName, { ids: number; requests: number }>>();

  constructor(registry: Registry = new Registry(), options: { defaultMetrics?: boolean } = {}) {
    this.registry = registry;
    if (options.defaultMetrics) collectProcessMetrics(registry);
    const flush = (): void => this.flushIssued();
    this.issued = new Counter({
      name: 'idmint_ids_issued_total',
      help: 'IDs handed out, by tag and source',
      labelNames: ['biz_tag', 'source'],
      registers: [registry],
      collect: flush,
    });
    this.requests = new Counter({
      name: 'idmint_requests_total',
      help: 'Successful ID requests, by tag and source',
      labelNames: ['biz_tag', 'source'],
      registers: [registry],
      collect: flush,
    });
    this.errors = new Counter({ name: 'idmint_errors_total', help: 'Failed ID requests, by error code', labelNames: ['code'], registers: [registry] });
    this.allocations = new Counter({
      name: 'idmint_segment_allocations_total',
      help: 'Segments taken from the store',
      labelNames: ['biz_tag'],
      registers: [registry],
    });
    this.rewinds = new Counter({
      name: 'idmint_segment_rewinds_total',
      help: 'Segments Postgres handed out at or below the fence (its counter was rewound, e.g. by a failover that lost commits): discarded, the counter raised past the fence',
      labelNames: ['biz_tag'],
      registers: [registry],
    });
    this.allocationSeconds = new Histogram({
      name: 'idmint_segment_allocation_seconds',
      help: 'Latency of one segment allocation',
      labelNames: ['biz_tag'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers: [registry],
    });
    const depths = (): DepthReading[] => this.depthSource?.() ?? [];
    this.bufferDepth = new Gauge({
      name: 'idmint_buffer_depth',
      help: 'IDs ready in in-memory double buffers',
      labelNames: ['biz_tag', 'shard'],
      registers: [registry],
      collect() {
        this.reset();
        for (const { bizTag, shard, depth } of depths()) this.set({ biz_tag: bizTag, shard: String(shard) }, depth);
      },
    });
  }

  /**
   * Counts a request's IDs. The hot path adds to plain numbers per tag and source; the counters
   * take them when read (a scrape, `get()`), as prom-client would hash the labels on every inc().
   */
  recordIssued(bizTag: string, source: IdSourceName, count: number): void {
    let bySource = this.pending.get(bizTag);
    if (!bySource) this.pending.set(bizTag, (bySource = new Map()));
    const counts = bySource.get(source);
    if (counts) {
      counts.ids += count;
      counts.requests++;
    } else bySource.set(source, { ids: count, requests: 1 });
    this.history.record(source, count);
  }

  /** Moves the pending counts into the counters. */
  private flushIssued(): void {
    for (const [bizTag, bySource] of this.pending) {
      for (const [source, counts] of bySource) {
        this.issued.inc({ biz_tag: bizTag, source }, counts.ids);
        this.requests.inc({ biz_tag: bizTag, source }, counts.requests);
        let total = this.totals.get(bizTag);
        if (!total) this.totals.set(bizTag, (total = { pool: 0, segment: 0, snowflake: 0 }));
        total[source] += counts.ids;
      }
    }
    // Dropped, not zeroed: a tag that stops being asked for leaves nothing behind.
    this.pending.clear();
  }

  /** IDs issued by this process since it started, by tag and source. */
  issuedTotals(): Record<string, Record<IdSourceName, number>> {
    this.flushIssued();
    return Object.fromEntries([...this.totals].map(([tag, counts]) => [tag, { ...counts }]));
  }

  recordError(err: unknown): void {
    this.errors.inc({ code: isIdmintError(err) ? err.code : 'INTERNAL' });
  }
}

/** Wraps a store so every allocation is counted and timed. */
export function instrumentStore<S extends BizStore>(store: S, metrics: DispenserMetrics): S {
  const allocate = async (bizTag: string, step: number, options?: { shard?: number; by?: string }): Promise<Segment> => {
    const stop = metrics.allocationSeconds.startTimer({ biz_tag: bizTag });
    try {
      const segment = await store.allocate(bizTag, step, options);
      metrics.allocations.inc({ biz_tag: bizTag });
      return segment;
    } finally {
      stop();
    }
  };
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'allocate') return allocate;
      const value: unknown = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/**
 * prom-client's process and Node metrics, prefixed `idmint_`, without the three gauges named
 * `*_total` (`nodejs_active_handles_total`...), which `promtool check metrics` rejects: a
 * `_total` suffix promises a counter.
 */
export function collectProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry, prefix: 'idmint_' });
  for (const name of ['idmint_nodejs_active_handles_total', 'idmint_nodejs_active_requests_total', 'idmint_nodejs_active_resources_total']) {
    registry.removeSingleMetric(name);
  }
}
