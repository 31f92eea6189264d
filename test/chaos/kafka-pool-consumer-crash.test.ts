import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kafkaPoolTransport } from '../../src/client/kafka/transports.js';
import { isIdmintError } from '../../src/core/errors.js';
import { silentLogger } from '../../src/core/logger.js';
import { createKafka } from '../../src/kafka/kafka.js';
import { KafkaPoolSink } from '../../src/pool/kafka/sink.js';
import { startKafkaCluster, type KafkaCluster } from '../support/kafka-cluster.js';
import { uniqueName } from '../support/names.js';
import { sleep, until } from '../support/poll.js';
import { expectDisjoint, type Range } from '../support/unique.js';

/**
 * KafkaJS stops a consumer for good after a crash it does not restart from (a non-retriable
 * error, or the client's `restartOnFailure` answering no): disconnected, no event but CRASH, no
 * error on the next take. The SDK's pool transport must notice and start a new consumer, or the
 * tag answers POOL_EMPTY for the life of the process. A one-node cluster whose only broker is
 * SIGKILLed crashes the consumer; its client is told never to restart.
 */
describe('Kafka pool consumer: a crash KafkaJS does not restart from', () => {
  let cluster: KafkaCluster;
  beforeAll(async () => {
    cluster = await startKafkaCluster(1);
  }, 300_000);
  afterAll(async () => {
    await cluster?.close();
  }, 120_000);

  it('is replaced by a new consumer that serves again, with no block served twice', async () => {
    const bizTag = uniqueName('kcrash');
    const sink = new KafkaPoolSink({ kafka: createKafka({ brokers: cluster.brokers, clientId: 'kcrash-refill', logger: silentLogger }), partitions: 2, blockSize: 100 });
    let next = 1;
    const push = async (segments: number): Promise<void> => {
      for (let i = 0; i < segments; i++, next += 400) await sink.push({ bizTag, shard: 0, start: next, end: next + 399 });
    };
    await push(5);
    const kafka = createKafka({
      brokers: cluster.brokers,
      clientId: 'kcrash-sdk',
      logger: silentLogger,
      config: { retry: { retries: 1, initialRetryTime: 100, maxRetryTime: 500, restartOnFailure: async () => false } },
    });
    const transport = kafkaPoolTransport({ kafka, takeTimeoutMs: 500, sessionTimeoutMs: 6000 });
    const got: Range[] = [];
    const take = async (): Promise<number> => {
      try {
        const batch = await transport.fetchBlocks!(bizTag, 150);
        for (const b of batch.blocks ?? []) got.push(b);
        return batch.blocks?.length ?? 0;
      } catch (err) {
        if (!isIdmintError(err)) throw err;
        return 0;
      }
    };
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
      await transport.close();
      await sink.close();
    }
    expectDisjoint(got, 'blocks served');
    expect(got.length).toBeGreaterThan(1);
  }, 600_000);
});
