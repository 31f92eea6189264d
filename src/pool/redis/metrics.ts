import { Counter, Gauge, type Registry } from 'prom-client';
import { perRegistry } from '../../core/per-registry.js';

/** Pool metrics, shared by every pool on one registry (a metric registers once per registry). */
export interface RedisPoolMetrics {
  readonly depth: Gauge<'biz_tag' | 'shard' | 'kind'>;
  readonly taken: Counter<'biz_tag' | 'kind'>;
  readonly refillRequests: Counter<'biz_tag' | 'kind'>;
}

const onRegistry = perRegistry((registry: Registry): RedisPoolMetrics => {
  const registers = [registry];
  return {
    depth: new Gauge({
      name: 'idmint_pool_depth',
      help: 'IDs ready in a Redis pool, as last seen by a take or push',
      labelNames: ['biz_tag', 'shard', 'kind'],
      registers,
    }),
    taken: new Counter({ name: 'idmint_pool_taken_total', help: 'IDs handed out from Redis pools', labelNames: ['biz_tag', 'kind'], registers }),
    refillRequests: new Counter({
      name: 'idmint_pool_refill_requests_total',
      help: 'Refills asked for by takes that left a pool under its threshold',
      labelNames: ['biz_tag', 'kind'],
      registers,
    }),
  };
});

export function redisPoolMetrics(registry: Registry | undefined): RedisPoolMetrics | undefined {
  return registry ? onRegistry(registry) : undefined;
}
