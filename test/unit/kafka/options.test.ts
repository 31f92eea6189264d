import { describe, expect, it } from 'vitest';
import { createKafka } from '../../../src/kafka/kafkajs/client.js';
import { RESPONDER_DEFAULTS, createResponder } from '../../../src/kafka/responder.js';
import { KAFKA_CLIENT_DEFAULTS, createKafkaClient } from '../../../src/client/kafka/rpc-client.js';
import { KAFKA_POOL_SINK_DEFAULTS, KafkaPoolSink } from '../../../src/pool/kafka/sink.js';
import { Closers } from '../../../src/app/closers.js';
import { loadConfig } from '../../../src/app/config.js';
import { openKafkaPoolSink } from '../../../src/app/pools.js';
import { silentLogger } from '../../../src/core/logger.js';
import { KafkaPoolConsumer } from '../../../src/client/kafka/pool-consumer.js';
import type { IdDispenser } from '../../../src/core/ports.js';
import { TEST_VERIFY_KEY, testSigner } from '../../support/signing.js';

// Options are validated at construction (nothing connects here) and the defaults are frozen.
const kafka = createKafka({ brokers: '127.0.0.1:1' });
const dispenser: IdDispenser = { get: () => Promise.reject(new Error('unused')) };

describe('Kafka component options', () => {
  it('freezes the exported defaults', () => {
    for (const defaults of [RESPONDER_DEFAULTS, KAFKA_CLIENT_DEFAULTS, KAFKA_POOL_SINK_DEFAULTS]) expect(Object.isFrozen(defaults)).toBe(true);
  });

  // A constructor's option is a misconfiguration (CONFIG_INVALID, never an HTTP 400); a tag name is checked as a caller's argument.
  it.each([
    ['responder concurrency 0', () => createResponder({ signer: testSigner, kafka, dispenser, concurrency: 0 }), /concurrency/, 'CONFIG_INVALID'],
    ['responder maxCount 1.5', () => createResponder({ signer: testSigner, kafka, dispenser, maxCount: 1.5 }), /maxCount/, 'CONFIG_INVALID'],
    ['responder empty group', () => createResponder({ signer: testSigner, kafka, dispenser, groupId: '' }), /groupId/, 'CONFIG_INVALID'],
    ['client without brokers', () => createKafkaClient({ verifyKey: TEST_VERIFY_KEY }), /brokers/, 'CONFIG_INVALID'],
    ['client timeout 0', () => createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, timeoutMs: 0 }), /timeoutMs/, 'CONFIG_INVALID'],
    ['client retries -1', () => createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, retries: -1 }), /retries/, 'CONFIG_INVALID'],
    ['sink block size 0', () => new KafkaPoolSink({ signer: testSigner, kafka, blockSize: 0 }), /blockSize/, 'CONFIG_INVALID'],
    ['consumer bad tag', () => new KafkaPoolConsumer({ verifyKey: TEST_VERIFY_KEY, kafka, bizTag: 'Not A Tag' }), /invalid biz tag/, 'BAD_REQUEST'],
    [
      'consumer buffer 0',
      () => new KafkaPoolConsumer({ verifyKey: TEST_VERIFY_KEY, kafka, bizTag: 'order', bufferBlocks: 0 }),
      /bufferBlocks/,
      'CONFIG_INVALID',
    ],
  ])('refuses %s', (_name, make, message, code) => {
    expect(make).toThrow(message);
    try {
      make();
    } catch (err) {
      expect(err).toMatchObject({ code });
    }
  });

  it("builds the refill's Kafka pool sink only when KAFKA_BROKERS is set", () => {
    const closers = new Closers(silentLogger);
    expect(openKafkaPoolSink(loadConfig({}), { logger: silentLogger, closers, signer: testSigner })).toBeUndefined();
    const sink = openKafkaPoolSink(loadConfig({ KAFKA_BROKERS: '127.0.0.1:1' }), { logger: silentLogger, closers, signer: testSigner });
    expect(sink).toBeInstanceOf(KafkaPoolSink);
    expect((sink as KafkaPoolSink).settings.blockSize).toBe(KAFKA_POOL_SINK_DEFAULTS.blockSize);
    expect((sink as KafkaPoolSink).settings.partitions).toBe(16);
    const narrow = openKafkaPoolSink(loadConfig({ KAFKA_BROKERS: '127.0.0.1:1', IDMINT_KAFKA_POOL_PARTITIONS: '3' }), {
      logger: silentLogger,
      closers,
      signer: testSigner,
    });
    expect(narrow?.settings.partitions).toBe(3);
  });

  it('cuts a segment into blocks that grow with it: about two per partition, within [blockSize, maxBlockSize]', () => {
    const sink = new KafkaPoolSink({ signer: testSigner, kafka, partitions: 16 });
    expect(sink.blockIdsFor(10)).toBe(1000);
    expect(sink.blockIdsFor(24_000)).toBe(1000);
    expect(sink.blockIdsFor(10_000_000)).toBe(312_500);
    expect(sink.blockIdsFor(1_000_000_000)).toBe(1_000_000);
    expect(() => new KafkaPoolSink({ signer: testSigner, kafka, blockSize: 100, maxBlockSize: 50 })).toThrow(/maxBlockSize/);
  });

  it("names a client's reply topic and group after its clientId, uniquely", () => {
    const a = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, clientId: 'svc one' });
    const b = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, clientId: 'svc one' });
    expect(a.replyTopic).toMatch(/^idmint\.replies\.svc_one\.[0-9a-f-]{36}$/);
    expect(a.replyTopic).not.toBe(b.replyTopic);
  });
});
