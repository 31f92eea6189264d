import { randomUUID } from 'node:crypto';
import { AggregatorRegistry, type Registry } from 'prom-client';

export const METRICS_REQUEST = 'idmint:metrics-request';
export const METRICS_REPLY = 'idmint:metrics-reply';

export type MetricsMessage =
  { type: typeof METRICS_REQUEST; id: string } | { type: typeof METRICS_REPLY; id: string; text?: string; contentType?: string; error?: string };

/** What `/metrics` serves: one registry, or (in an IDMINT_PROCESSES group) the group's. */
export type MetricsSource = Pick<Registry, 'contentType' | 'metrics'>;

/**
 * `/metrics` of a process in an IDMINT_PROCESSES group: a scrape reaches one process (the
 * primary hands connections round-robin), so that process asks the primary, which collects
 * every process's registry (prom-client's AggregatorRegistry: counters and histograms summed,
 * gauges by each metric's aggregator) and answers. Falls back to this process's own metrics
 * if the primary does not answer within 3 s.
 */
export function groupMetrics(registry: Registry): MetricsSource {
  // Constructing one installs prom-client's worker-side listener; it answers with `registry`.
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([registry]);
  const pending = new Map<string, (message: MetricsMessage & { type: typeof METRICS_REPLY }) => void>();
  process.on('message', (message: MetricsMessage) => {
    if (message?.type === METRICS_REPLY) pending.get(message.id)?.(message);
  });
  return {
    contentType: registry.contentType,
    metrics: () =>
      new Promise<string>((resolve) => {
        const id = randomUUID();
        const timer = setTimeout(() => {
          pending.delete(id);
          void registry.metrics().then(resolve);
        }, 3000);
        pending.set(id, (reply) => {
          clearTimeout(timer);
          pending.delete(id);
          if (reply.text !== undefined) resolve(reply.text);
          else void registry.metrics().then(resolve);
        });
        process.send?.({ type: METRICS_REQUEST, id } satisfies MetricsMessage);
      }),
  };
}
