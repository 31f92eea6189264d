import { Counter, Gauge, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';
import { perRegistry } from '../core/per-registry.js';

/**
 * Kafka metrics. Several components (a responder and a pool sink, two responders in one test)
 * may share a registry, so each set is made once per registry and shared.
 */

export interface ResponderMetrics {
  requests: Counter<'outcome'>;
  errors: Counter<'code'>;
  latency: Histogram<'outcome'>;
  ids: Counter;
}

export const responderMetrics = perRegistry((registry: Registry): ResponderMetrics => {
  const registers = [registry];
  return {
    requests: new Counter({
      name: 'idmint_kafka_requests_total',
      help: 'Kafka ID requests by outcome: ok, error, expired (past deadline, dropped), unanswerable (no readable replyTo)',
      labelNames: ['outcome'] as const,
      registers,
    }),
    errors: new Counter({
      name: 'idmint_kafka_request_errors_total',
      help: 'Kafka ID requests answered with an error, by error code',
      labelNames: ['code'] as const,
      registers,
    }),
    latency: new Histogram({
      name: 'idmint_kafka_reply_seconds',
      help: 'Time from a request reaching the responder to its reply being acknowledged by Kafka',
      labelNames: ['outcome'] as const,
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers,
    }),
    ids: new Counter({
      name: 'idmint_kafka_ids_served_total',
      help: 'IDs handed out in Kafka replies',
      registers,
    }),
  };
});

export interface KafkaPoolMetrics {
  depth: Gauge<'biz_tag'>;
  blocks: Counter<'biz_tag'>;
}

export const kafkaPoolMetrics = perRegistry((registry: Registry): KafkaPoolMetrics => {
  const registers = [registry];
  return {
    depth: new Gauge({
      name: 'idmint_kafka_pool_depth_ids',
      help: "Unconsumed IDs in a tag's Kafka pool topic, as last measured",
      labelNames: ['biz_tag'] as const,
      registers,
    }),
    blocks: new Counter({
      name: 'idmint_kafka_pool_blocks_published_total',
      help: 'Blocks of IDs published to Kafka pool topics',
      labelNames: ['biz_tag'] as const,
      registers,
    }),
  };
});
