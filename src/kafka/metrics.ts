import { Counter, Gauge, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';

/**
 * Kafka metrics. Several components (a responder and a pool sink, two responders in one test)
 * may share a registry, so each metric is registered once and reused.
 */

function reuse<T>(registry: Registry, name: string, make: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? make();
}

export interface ResponderMetrics {
  requests: Counter<'outcome'>;
  errors: Counter<'code'>;
  latency: Histogram<'outcome'>;
  ids: Counter;
}

export function responderMetrics(registry: Registry): ResponderMetrics {
  const registers = [registry];
  return {
    requests: reuse(registry, 'idmint_kafka_requests_total', () => new Counter({
      name: 'idmint_kafka_requests_total',
      help: 'Kafka ID requests by outcome: ok, error, expired (past deadline, dropped), unanswerable (no readable replyTo)',
      labelNames: ['outcome'] as const,
      registers,
    })),
    errors: reuse(registry, 'idmint_kafka_request_errors_total', () => new Counter({
      name: 'idmint_kafka_request_errors_total',
      help: 'Kafka ID requests answered with an error, by error code',
      labelNames: ['code'] as const,
      registers,
    })),
    latency: reuse(registry, 'idmint_kafka_reply_seconds', () => new Histogram({
      name: 'idmint_kafka_reply_seconds',
      help: 'Time from a request reaching the responder to its reply being acknowledged by Kafka',
      labelNames: ['outcome'] as const,
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers,
    })),
    ids: reuse(registry, 'idmint_kafka_ids_served_total', () => new Counter({
      name: 'idmint_kafka_ids_served_total',
      help: 'IDs handed out in Kafka replies',
      registers,
    })),
  };
}

export interface KafkaPoolMetrics {
  depth: Gauge<'biz_tag'>;
  blocks: Counter<'biz_tag'>;
}

export function kafkaPoolMetrics(registry: Registry): KafkaPoolMetrics {
  const registers = [registry];
  return {
    depth: reuse(registry, 'idmint_kafka_pool_depth_ids', () => new Gauge({
      name: 'idmint_kafka_pool_depth_ids',
      help: 'Unconsumed IDs in a tag\'s Kafka pool topic, as last measured',
      labelNames: ['biz_tag'] as const,
      registers,
    })),
    blocks: reuse(registry, 'idmint_kafka_pool_blocks_published_total', () => new Counter({
      name: 'idmint_kafka_pool_blocks_published_total',
      help: 'Blocks of IDs published to Kafka pool topics',
      labelNames: ['biz_tag'] as const,
      registers,
    })),
  };
}
