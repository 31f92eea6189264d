import { Counter, Histogram, type Registry } from 'prom-client';
import { perRegistry } from '../core/per-registry.js';

export interface RefillMetrics {
  readonly refills: Counter<'biz_tag' | 'reason' | 'outcome'>;
  readonly duration: Histogram<'reason'>;
  readonly ids: Counter<'biz_tag' | 'kind'>;
  readonly segments: Counter<'biz_tag' | 'kind'>;
  readonly sweeps: Counter<'outcome'>;
}

/** Refill metrics on one registry (made once per registry, shared by processors). */
const onRegistry = perRegistry((registry: Registry): RefillMetrics => {
  const registers = [registry];
  return {
    refills: new Counter({
      name: 'idmint_refill_total',
      help: 'Refill attempts by outcome (pushed, skipped, failed)',
      labelNames: ['biz_tag', 'reason', 'outcome'],
      registers,
    }),
    duration: new Histogram({
      name: 'idmint_refill_duration_seconds',
      help: 'Time from a refill job starting to its last segment pushed',
      labelNames: ['reason'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    ids: new Counter({ name: 'idmint_refill_ids_total', help: 'IDs pushed into pools by refills', labelNames: ['biz_tag', 'kind'], registers }),
    segments: new Counter({
      name: 'idmint_refill_segments_total',
      help: 'Segments taken from the store by refills',
      labelNames: ['biz_tag', 'kind'],
      registers,
    }),
    sweeps: new Counter({ name: 'idmint_refill_sweeps_total', help: 'Cron sweeps by outcome', labelNames: ['outcome'], registers }),
  };
});

export function refillMetrics(registry: Registry | undefined): RefillMetrics | undefined {
  return registry ? onRegistry(registry) : undefined;
}
