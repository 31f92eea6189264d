import { Counter, Gauge, type Registry } from 'prom-client';

/** Pool metrics, shared by every pool on one registry (a metric registers once per registry). */
export interface RedisPoolMetrics {
  readonly depth: Gauge<'biz_tag' | 'shard' | 'kind'>;
  readonly taken: Counter<'biz_tag' | 'kind'>;
  readonly refillRequests: Counter<'biz_tag' | 'kind'>;
}

const cache = new WeakMap<Registry, RedisPoolMetrics>();

export function redisPoolMetrics(registry: Registry | undefined): RedisPoolMetrics | undefined {
  if (!registry) return undefined;
  let m = cache.get(registry);
  if (!m) {
    const registers = [registry];
    m = {
      depth: new Gauge({ name: 'idmint_pool_depth', help: 'IDs ready in a Redis pool, as last seen by a take or push', labelNames: ['biz_tag', 'shard', 'kind'], registers }),
      taken: new Counter({ name: 'idmint_pool_taken_total', help: 'IDs handed out from Redis pools', labelNames: ['biz_tag', 'kind'], registers }),
      refillRequests: new Counter({ name: 'idmint_pool_refill_requests_total', help: 'Refills asked for by takes that left a pool under its threshold', labelNames: ['biz_tag', 'kind'], registers }),
    };
    cache.set(registry, m);
  }
  return m;
}
