// The SDK (`idmint/client`): prefetching client and its transports. Exports by name.
export { createIdmintClient, IdmintClient, CLIENT_DEFAULTS } from './client.js';
export type { IdmintClientOptions, IdmintClientSettings, TagHandle } from './client.js';
export type { TagBufferStats } from './tag-buffer.js';
export type { BlocksBatch, IdsBatch, IdTransport, TransportBatch } from './transport.js';
export { httpTransport, HTTP_TRANSPORT_DEFAULTS } from './http-transport.js';
export { failoverTransport } from './failover-transport.js';
export type { FailoverTransportOptions } from './failover-transport.js';
export type { HttpTransport, HttpTransportOptions, HttpTransportSettings } from './http-transport.js';
export { kafkaTransport, kafkaPoolTransport } from './kafka/transports.js';
export type { KafkaTransportOptions, KafkaPoolTransportOptions } from './kafka/transports.js';
// What kafkaTransport and kafkaPoolTransport take, so `idmint/client` alone is enough to use them.
export { createKafkaClient, IdmintKafkaClient } from './kafka/rpc-client.js';
export type { KafkaClientOptions } from './kafka/rpc-client.js';
// How to reach Kafka, in idmint's own types: no Kafka client is loaded until a Kafka transport starts.
export type { KafkaConnectionOptions, KafkaDriverName, KafkaSaslOptions, KafkaTlsOptions } from '../kafka/ports.js';
export type { KafkaSource, LegacyKafkaInstance } from '../kafka/driver.js';
export { IdmintError, isIdmintError } from '../core/errors.js';
export type { ErrorCode } from '../core/errors.js';
