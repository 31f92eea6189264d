// Pools: where pre-minted IDs wait. Exports by name; each backend appends its own block.

// Redis list and counter pools (issue #5).
export { RedisListPool } from './redis-list-pool.js';
export { RedisCounterPool } from './redis-counter-pool.js';
export { RedisPoolBase, REDIS_POOL_DEFAULTS } from './redis-pool-base.js';
export type { RedisPoolOptions, RefillTrigger, RefillReason } from './redis-pool-base.js';
export { RedisPoolMeta, POOL_META_DEFAULTS } from './redis-pool-meta.js';
export type { RedisPoolMetaOptions } from './redis-pool-meta.js';
export { poolKeys, allTagKeys, trackedTagsKey, MAX_POOL_SHARDS } from './redis-keys.js';
export type { PoolKeys } from './redis-keys.js';

// Kafka pool topics (issue #6).
export { KafkaPoolSink, KAFKA_POOL_SINK_DEFAULTS, kafkaPoolSinkFromConfig } from './kafka-sink.js';
export type { KafkaPoolSinkOptions, KafkaPoolSinkSettings } from './kafka-sink.js';
export { KafkaPoolConsumer, KAFKA_POOL_CONSUMER_DEFAULTS } from './kafka-consumer.js';
export type { KafkaPoolConsumerOptions, KafkaPoolConsumerSettings } from './kafka-consumer.js';
