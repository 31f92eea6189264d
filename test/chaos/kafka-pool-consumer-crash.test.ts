import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kafkaPoolTransport } from '../../src/client/kafka/transports.js';
import { isIdmintError } from '../../src/core/errors.js';
import { silentLogger } from '../../src/core/logger.js';
import { createKafka } from '../../src/kafka/kafkajs/client.js';
import { KafkaPoolSink } from '../../src/pool/kafka/sink.js';
import { startKafkaCluster, type KafkaCluster } from '../support/kafka-cluster.js';
import { testKafka } from '../support/kafka.js';
import { uniqueName } from '../support/names.js';
import { sleep, until } from '../support/poll.js';
import { expectDisjoint, type Range } from '../support/unique.js';
import { TEST_VERIFY_KEY, testSigner } from '../support/signing.js';

/**
 * KafkaJS stops a consumer for good after a crash it does not restart from (a non-retriable
 * error, or the client's `restartOnFailure` answering no): disconnected, no event but CRASH, no
 * error on the next take. The SDK's pool transport must notice and start a new consumer, or the
 * tag answers POOL_EMPTY for the life of the process. A one-node cluster whose only broker is
 * SIGKILLed crashes the consumer; its client is told never to restart.
 */
/**
 * A pool topic for `bizTag` on the cluster and an SDK pool transport reading it: `push` publishes
 * segments of 400 IDs, `take` asks for 150 IDs and keeps what comes (a thrown idmint error is
 * counted by code and taken as nothing).
 */
function poolOf(brokers: string, bizTag: string, transport: ReturnType<typeof kafkaPoolTransport>) {
  const sink = new KafkaPoolSink({
    signer: testSigner,
    kafka: testKafka(`${bizTag}-refill`, brokers),
    partitions: 2,
    blockSize: 100,
  });
  let next = 1;
  const got: Range[] = [];
  const codes = new Map<string, number>();
  return {
    got,
    codes,
    async push(segments: number): Promise<void> {
      for (let i = 0; i < segments; i++, next += 400) await sink.push({ bizTag, shard: 0, start: next, end: next + 399 });
    },
    async take(): Promise<number> {
      try {
        const batch = await transport.fetchBlocks!(bizTag, 150);
        for (const b of batch.blocks ?? []) got.push(b);
        return batch.blocks?.length ?? 0;
      } catch (err) {
        if (!isIdmintError(err)) throw err;
        codes.set(err.code, (codes.get(err.code) ?? 0) + 1);
        return 0;
      }
    },
    async close(): Promise<void> {
      await transport.close();
      await sink.close();
    },
  };
}

describe('Kafka pool consumer: a crash KafkaJS does not restart from', () => {
  let cluster: KafkaCluster;
  beforeAll(async () => {
    cluster = await startKafkaCluster(1);
  }, 300_000);
  afterAll(async () => {
    await cluster?.close();
  }, 120_000);

  it('is replaced by a new consumer that serves again, with no block served twice', async () => {
    // KafkaJS whatever IDMINT_KAFKA_DRIVER says: the crash is KafkaJS's own (its runner told not to restart).
    const kafka = createKafka({
      brokers: cluster.brokers,
      clientId: 'kcrash-sdk',
      logger: silentLogger,
      config: { retry: { retries: 1, initialRetryTime: 100, maxRetryTime: 500, restartOnFailure: async () => false } },
    });
    const { got, push, take, close } = poolOf(
      cluster.brokers,
      uniqueName('kcrash'),
      kafkaPoolTransport({ verifyKey: TEST_VERIFY_KEY, kafka, takeTimeoutMs: 500, sessionTimeoutMs: 6000 }),
    );
    await push(5);
    try {
      await until('the first blocks', async () => (await take()) > 0, { timeoutMs: 60_000 });
      await cluster.kill(1);
      // Takes meanwhile fail: the consumer crashes, and KafkaJS is told not to restart it.
      for (let i = 0; i < 10; i++) {
        await take();
        await sleep(500);
      }
      await cluster.start(1);
      await push(5);
      const before = got.length;
      await until('blocks again after the broker came back', async () => (await take()) > 0 && got.length > before, { timeoutMs: 120_000, intervalMs: 200 });
    } finally {
      await close();
    }
    expectDisjoint(got, 'blocks served');
    expect(got.length).toBeGreaterThan(1);
  }, 600_000);

  it('a consumer that completes no fetch for stallTimeoutMs is replaced, and serving resumes after the hang', async () => {
    const kafka = testKafka('kstall-sdk', cluster.brokers);
    const transport = kafkaPoolTransport({
      verifyKey: TEST_VERIFY_KEY,
      kafka,
      takeTimeoutMs: 500,
      sessionTimeoutMs: 6000,
      stallTimeoutMs: 6000,
      joinTimeoutMs: 10_000,
    });
    const { got, codes, push, take, close } = poolOf(cluster.brokers, uniqueName('kstall'), transport);
    await push(5);
    try {
      await until('the first blocks', async () => (await take()) > 0, { timeoutMs: 60_000 });
      // The only broker hung: no fetch completes, the consumer is silent past stallTimeoutMs.
      cluster.pause(1);
      const hungUntil = Date.now() + 15_000;
      while (Date.now() < hungUntil) {
        await take();
        await sleep(500);
      }
      cluster.resume(1);
      await push(5);
      const before = got.length;
      await until('blocks again after the broker resumed', async () => (await take()) > 0 && got.length > before, { timeoutMs: 120_000, intervalMs: 200 });
    } finally {
      cluster.resume(1);
      await close();
    }
    // NOT_READY: the stalled consumer was declared failed and replaced (a silent one answers POOL_EMPTY).
    expect(codes.get('NOT_READY') ?? 0, JSON.stringify(Object.fromEntries(codes))).toBeGreaterThan(0);
    expectDisjoint(got, 'blocks served');
  }, 600_000);
});
