import { Gauge, type Registry } from 'prom-client';
import type { Logger } from '../core/logger.js';
import { hasCounter, type BizStore, type SegmentUsage } from '../core/ports.js';
import type { DispenserMetrics } from '../dispenser/metrics.js';

/** Fewest milliseconds between two rate samples: shorter scrape intervals reuse the last rate. */
export const EXHAUSTION_SAMPLE_MS = 5000;

/**
 * Days until each tag with a `maxLimit` runs out at this process's current rate, as
 * `idmint_tag_days_left`, and `idmint_tag_exhaustion_warning` = 1 when that is under
 * IDMINT_EXHAUSTION_WARN_DAYS (the alert rule fires on it; the log says it once an hour).
 * Computed at scrape time: remaining IDs from the segment counters, rate from the issued counter.
 * In one of N regions (`regions`), the region holds one stripe in N of what remains.
 */
export function watchExhaustion(options: {
  registry: Registry;
  metrics: DispenserMetrics;
  store: Pick<BizStore, 'listBiz'> & SegmentUsage;
  warnDays: number;
  logger: Logger;
  regions?: number;
}): void {
  const { store, metrics, warnDays } = options;
  const log = options.logger.child({ component: 'exhaustion' });
  let last: { at: number; totals: Map<string, number> } | undefined;
  let rates = new Map<string, number>();
  const warned = new Map<string, number>();
  // A registry reads its metrics concurrently: both gauges wait for one computation per scrape.
  let pending: Promise<void> | undefined;
  const refresh = (): Promise<void> => {
    pending ??= compute().finally(() => setImmediate(() => (pending = undefined)));
    return pending;
  };
  const labelNames = ['biz_tag'] as const;
  const daysLeft = new Gauge({
    name: 'idmint_tag_days_left',
    help: "Days until a tag with maxLimit runs out at this process's current rate",
    labelNames,
    registers: [options.registry],
    collect: refresh,
  });
  const warning = new Gauge({
    name: 'idmint_tag_exhaustion_warning',
    help: `1 when a tag with maxLimit runs out within IDMINT_EXHAUSTION_WARN_DAYS (${warnDays}) at the current rate`,
    labelNames,
    registers: [options.registry],
    collect: refresh,
  });

  async function compute(): Promise<void> {
    daysLeft.reset();
    warning.reset();
    const now = Date.now();
    const totals = new Map<string, number>();
    for (const v of (await metrics.issued.get()).values) totals.set(String(v.labels.biz_tag), (totals.get(String(v.labels.biz_tag)) ?? 0) + v.value);
    if (last && now - last.at >= EXHAUSTION_SAMPLE_MS) {
      const seconds = (now - last.at) / 1000;
      const previous = last.totals;
      rates = new Map([...totals].map(([tag, total]) => [tag, (total - (previous.get(tag) ?? 0)) / seconds]));
      last = { at: now, totals };
    } else if (!last) {
      last = { at: now, totals };
    }
    const limited = (await store.listBiz()).filter((t) => t.maxLimit !== null && hasCounter(t.mode));
    if (limited.length === 0) return;
    const used = await store.highestAllocated(limited.map((t) => t.bizTag));
    for (const tag of limited) {
      const rate = rates.get(tag.bizTag) ?? 0;
      if (rate <= 0) continue;
      const days = Math.max(0, (tag.maxLimit as number) - (used.get(tag.bizTag) ?? 0)) / (options.regions ?? 1) / rate / 86_400;
      daysLeft.set({ biz_tag: tag.bizTag }, days);
      warning.set({ biz_tag: tag.bizTag }, days < warnDays ? 1 : 0);
      if (days < warnDays && now - (warned.get(tag.bizTag) ?? 0) > 3_600_000) {
        warned.set(tag.bizTag, now);
        log.warn(
          { bizTag: tag.bizTag, daysLeft: Number(days.toFixed(3)), maxLimit: tag.maxLimit, ratePerSecond: Math.round(rate) },
          `tag "${tag.bizTag}" runs out of IDs within ${warnDays} days at the current rate`,
        );
      }
    }
  }
}
