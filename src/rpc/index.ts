// Kafka request/reply: responder, client, wire codecs, topic admin. Exports by name.
export { createResponder, RESPONDER_DEFAULTS } from './responder.js';
export type { Responder, ResponderOptions, ResponderSettings } from './responder.js';
export { createKafkaClient, IdmintKafkaClient, KAFKA_CLIENT_DEFAULTS } from './client.js';
export type { GetIdsOptions, KafkaClientOptions, KafkaClientSettings } from './client.js';
export { createKafka, parseBrokers, pinoLogCreator } from './kafka.js';
export type { CreateKafkaOptions } from './kafka.js';
export {
  REQUEST_TOPIC,
  RESPONDER_GROUP,
  POOL_TOPIC_PREFIX,
  POOL_GROUP_PREFIX,
  INIT_COMMAND,
  poolTopic,
  poolGroup,
  ensureTopics,
  assertTopicsExist,
  initTopics,
} from './topics.js';
export type { TopicSpec, InitTopicsOptions } from './topics.js';
export {
  WIRE_VERSION,
  TOPIC_NAME_PATTERN,
  decodeRequest,
  encodeRequest,
  decodeReply,
  encodeIdsReply,
  encodeErrorReply,
  decodePoolBlock,
  encodePoolBlock,
} from './messages.js';
export type { IdRequest, IdReply, PoolBlock, DecodedRequest, DecodeLimits } from './messages.js';
export { TopicProducer } from './producer.js';
export { responderMetrics, poolMetrics } from './metrics.js';
export type { ResponderMetrics, PoolMetrics } from './metrics.js';
