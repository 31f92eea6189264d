import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { kafkaPoolMetrics, responderMetrics } from '../../../src/kafka/metrics.js';

describe('Kafka metrics', () => {
  it('lets two components share one prom-client registry without registering a name twice', async () => {
    const registry = new Registry();
    const first = responderMetrics(registry);
    expect(() => responderMetrics(registry)).not.toThrow();
    expect(responderMetrics(registry)).toBe(first);
    first.ids.inc(3);
    expect(await registry.getSingleMetricAsString('idmint_kafka_ids_served_total')).toContain('idmint_kafka_ids_served_total 3');
    expect(responderMetrics(new Registry())).not.toBe(first);
  });

  it('keeps the pool and responder sets apart on one registry', () => {
    const registry = new Registry();
    const pool = kafkaPoolMetrics(registry);
    responderMetrics(registry);
    expect(kafkaPoolMetrics(registry)).toBe(pool);
    expect(
      registry
        .getMetricsAsArray()
        .map((m) => m.name)
        .sort(),
    ).toEqual([
      'idmint_kafka_ids_served_total',
      'idmint_kafka_pool_blocks_published_total',
      'idmint_kafka_pool_depth_ids',
      'idmint_kafka_reply_seconds',
      'idmint_kafka_request_errors_total',
      'idmint_kafka_requests_total',
    ]);
  });
});
