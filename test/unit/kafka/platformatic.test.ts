import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { AuthenticationError, MultipleErrors, NetworkError, ProtocolError, ResponseError } from '@platformatic/kafka';
import { openKafka } from '../../../src/kafka/driver.js';
import { isCoordinatorMoving, isLeaderNotAvailable, isUnknownTopic } from '../../../src/kafka/errors.js';
import {
  brokerList,
  isLibraryAuthFailure,
  isLibraryError,
  isProducerIdRefusal,
  platformaticOptions,
  protocolErrorName,
  REQUEST_TIMEOUT_MS,
  typed,
} from '../../../src/kafka/platformatic/options.js';
import { batchesOf, fetchWindowMs } from '../../../src/kafka/platformatic/reader.js';
import { headersOf, partitionerFor } from '../../../src/kafka/platformatic/writer.js';

// The @platformatic/kafka driver's pure parts: options, errors, batches, partitions, headers.
describe('@platformatic/kafka driver', () => {
  it("maps idmint's connection options onto the library's", () => {
    expect(brokerList(' a:1, b:2 ,,')).toEqual(['a:1', 'b:2']);
    const plain = platformaticOptions({ brokers: 'a:1,b:2' });
    expect(plain).toEqual({
      clientId: 'idmint',
      bootstrapBrokers: ['a:1', 'b:2'],
      requestTimeout: REQUEST_TIMEOUT_MS,
      retries: 5,
      retryDelay: 250,
      metadataMaxAge: 5000,
      autocreateTopics: false,
    });
    expect(platformaticOptions({ brokers: ['a:1'], tls: true })).toMatchObject({ tls: {}, tlsServerName: true });
    expect(platformaticOptions({ brokers: ['a:1'], tls: { ca: 'PEM', rejectUnauthorized: false, servername: 'kafka.local' } })).toMatchObject({
      tls: { ca: ['PEM'], rejectUnauthorized: false },
      tlsServerName: 'kafka.local',
    });
    expect(platformaticOptions({ brokers: ['a:1'], sasl: { mechanism: 'scram-sha-256', username: 'u', password: 'p' } }).sasl).toEqual({
      mechanism: 'SCRAM-SHA-256',
      username: 'u',
      password: 'p',
    });
    expect(platformaticOptions({ brokers: ['a:1'], clientId: 'c', retries: 0, connectionTimeoutMs: 200, requestTimeoutMs: 300 })).toMatchObject({
      clientId: 'c',
      retries: 0,
      connectTimeout: 200,
      requestTimeout: 300,
    });
  });

  it('opens from connection options with driver platformatic, without connecting', async () => {
    const driver = await openKafka({ brokers: '127.0.0.1:1', driver: 'platformatic' });
    expect(driver.name).toBe('platformatic');
    expect(await openKafka(driver)).toBe(driver);
    expect(driver.isClientError(new NetworkError('Connection closed'))).toBe(true);
    expect(driver.isClientError(new Error('boom'))).toBe(false);
    expect(driver.isAuthFailure(new MultipleErrors('failed', [new AuthenticationError('SASL authentication failed')]))).toBe(true);
    expect(driver.isAuthFailure(new NetworkError('Connection closed'))).toBe(false);
  });

  it("gives the library's protocol errors the names idmint recognises, through its aggregates", () => {
    const unknown = typed(new MultipleErrors('metadata failed', [new ProtocolError('UNKNOWN_TOPIC_OR_PARTITION')]));
    expect(protocolErrorName(unknown)).toBe('UNKNOWN_TOPIC_OR_PARTITION');
    expect(isUnknownTopic(unknown)).toBe(true);
    expect(isLeaderNotAvailable(typed(new ProtocolError('LEADER_NOT_AVAILABLE')))).toBe(true);
    // A response's per-partition error codes (16: NOT_COORDINATOR).
    const response = typed(new ResponseError(8, 8, { '/topics/0/partitions/0': [16, null] }, {}));
    expect(protocolErrorName(response)).toBe('NOT_COORDINATOR');
    expect(isCoordinatorMoving(response)).toBe(true);
    expect(isLibraryError(response)).toBe(true);
    expect(isLibraryAuthFailure(typed(new ProtocolError('SASL_AUTHENTICATION_FAILED')))).toBe(true);
    const plain = new Error("not the library's");
    expect(typed(plain)).toBe(plain);
    expect(protocolErrorName(plain)).toBeUndefined();
  });

  it('splits a round of records into batches by partition and the membership they were fetched under, keeping order', () => {
    const at = (partition: number, generationId: number, offset: number) => ({ partition, membership: { generationId, memberId: 'm' }, offset });
    const round = [at(0, 1, 5), at(1, 1, 0), at(0, 1, 6), at(0, 2, 3), at(1, 1, 1)];
    expect(batchesOf(round).map((b) => b.map((r) => `${r.partition}@${r.membership.generationId}:${r.offset}`))).toEqual([
      ['0@1:5', '0@1:6'],
      ['1@1:0', '1@1:1'],
      ['0@2:3'],
    ]);
    expect(fetchWindowMs(undefined)).toBe(15_000);
    expect(fetchWindowMs(10_000)).toBe(30_000);
  });

  it("partitions a key as Java's client and KafkaJS do, and spreads keyless records", () => {
    const partition = partitionerFor();
    const message = { topic: 't' };
    // murmur2 with the sign bit dropped: the record goes to (this % partitions), as KafkaJS's DefaultPartitioner.
    const keyed = partition(message, Buffer.from('order'));
    const kafkajsMurmur2 = createRequire(import.meta.url)('kafkajs/src/producer/partitioners/default/murmur2.js') as (key: Buffer) => number;
    expect(keyed).toBe(kafkajsMurmur2(Buffer.from('order')) & 0x7fffffff);
    expect(partition(message, Buffer.from('order'))).toBe(keyed);
    expect([partition(message, undefined), partition(message, undefined), partition({ topic: 'u' }, undefined)]).toEqual([0, 1, 0]);
  });

  it('sends headers as one Buffer per name', () => {
    expect(headersOf(undefined)).toBeUndefined();
    expect(headersOf({ traceparent: '00-a-b-01', multi: ['x', Buffer.from('y')], none: undefined })).toEqual({
      traceparent: Buffer.from('00-a-b-01'),
      multi: Buffer.from('y'),
    });
  });
});

describe('isProducerIdRefusal', () => {
  const refused = new AggregateError([new Error('COORDINATOR_NOT_AVAILABLE')], 'Received response with error while executing API InitProducerId(v5)');
  it('is a send refused its producer id, nothing sent: safe to send again', () => {
    expect(isProducerIdRefusal(refused)).toBe(true);
    expect(isProducerIdRefusal(new Error('send failed', { cause: refused }))).toBe(true);
  });
  it('is never a failure that tells of a Produce request (it may have landed)', () => {
    expect(isProducerIdRefusal(new AggregateError([refused], 'Received response with error while executing API Produce(v9)'))).toBe(false);
    expect(isProducerIdRefusal(new Error('Received response with error while executing API Produce(v9)'))).toBe(false);
    expect(isProducerIdRefusal(undefined)).toBe(false);
  });
});
