import type { Kafka } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdmintClient, IdmintError, kafkaPoolTransport, kafkaTransport } from '../../../src/client/index.js';
import type { IdmintClient } from '../../../src/client/index.js';
import { KafkaPoolSink } from '../../../src/pool/kafka/sink.js';
import { createKafkaClient } from '../../../src/client/kafka/rpc-client.js';
import type { IdmintKafkaClient } from '../../../src/client/kafka/rpc-client.js';
import { createResponder } from '../../../src/kafka/responder.js';
import type { Responder } from '../../../src/kafka/responder.js';
import { createTopic, deleteTopics, testKafka, testKafkaOptions } from '../../support/kafka.js';
import { storeWithDispenser, type DispensingStore } from '../../support/store.js';
import { uniqueName } from '../../support/names.js';
import { expectNoDuplicates } from '../../support/unique.js';
import { TEST_VERIFY_KEY, testSigner } from '../../support/signing.js';

/** `callers` concurrent callers take `total` IDs from `client` (batches of 1..50); retriable errors are retried. */
async function drain(client: IdmintClient, bizTag: string, total: number, callers: number, timeoutMs = 45_000): Promise<bigint[]> {
  const ids: bigint[] = [];
  let left = total;
  const deadline = Date.now() + timeoutMs;
  const errors = new Map<string, number>();
  await Promise.all(
    Array.from({ length: callers }, async (_, n) => {
      for (let i = 0; left > 0; i++) {
        // Past the deadline, say what the retries met rather than run into the test's timeout silently.
        if (Date.now() > deadline)
          throw new Error(`${ids.length} of ${total} IDs after ${timeoutMs} ms; errors retried: ${JSON.stringify(Object.fromEntries(errors))}`);
        const want = Math.min(left, 1 + ((n * 13 + i) % 50));
        left -= want;
        try {
          ids.push(...(i % 2 ? await client.nextMany(bizTag, want) : [await client.next(bizTag), ...(await client.nextMany(bizTag, want - 1))]));
        } catch (err) {
          if (!(err instanceof IdmintError) || !err.retriable) throw err;
          errors.set(`${err.code}: ${err.message}`, (errors.get(`${err.code}: ${err.message}`) ?? 0) + 1);
          left += want;
          // A caller that retried at once would spin, and a spinning process is late to the group join it waits for.
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    }),
  );
  return ids;
}

// Real Kafka and a real dispenser over Postgres (the Kafka engineer's helpers); names unique per run.
describe('client over Kafka', () => {
  let kafka: Kafka;
  let ts: DispensingStore;
  let responder: Responder;
  let rpc: IdmintKafkaClient;
  const requestTopic = uniqueName('idmint.requests.client');
  const groupId = uniqueName('idmint.responders.client');

  beforeAll(async () => {
    kafka = testKafka('idmint-client-test');
    ts = await storeWithDispenser();
    await ts.store.createBiz({ bizTag: 'order', step: 1000 });
    await createTopic(kafka, requestTopic, 2);
    responder = createResponder({ signer: testSigner, kafka: testKafkaOptions('sdk-test-responder'), dispenser: ts.dispenser, groupId, requestTopic });
    await responder.start();
    // The SDK as an application uses it: connection options, no Kafka client of its own.
    rpc = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka: testKafkaOptions('sdk-test'), requestTopic, clientId: 'sdk-test', timeoutMs: 20_000 });
  });

  afterAll(async () => {
    await rpc?.close();
    await responder?.close();
    await deleteTopics(kafka, [requestTopic]);
    await ts?.close();
  });

  it('kafkaTransport: 2 clients × 16 callers take 20,000 IDs over request/reply with zero duplicates', async () => {
    const second = createKafkaClient({
      verifyKey: TEST_VERIFY_KEY,
      kafka: testKafkaOptions('sdk-test-2'),
      requestTopic,
      clientId: 'sdk-test-2',
      timeoutMs: 20_000,
    });
    const clients = [
      createIdmintClient({ transport: kafkaTransport(rpc), batchSize: 200, timeoutMs: 30_000 }),
      createIdmintClient({ transport: kafkaTransport(second, { closeClient: true }), batchSize: 200, timeoutMs: 30_000 }),
    ];
    const ids = (await Promise.all(clients.map((c) => drain(c, 'order', 10_000, 16)))).flat();
    expect(ids).toHaveLength(20_000);
    expectNoDuplicates(ids);
    expect(Math.max(...clients.flatMap((c) => c.stats()).map((s) => s.batchSize))).toBeGreaterThan(200);
    await Promise.all(clients.map((c) => c.close()));
    // closeClient: the second rpc client closed with its transport; the shared one did not.
    await expect(second.getIds('order', 1)).rejects.toMatchObject({ code: 'NOT_READY' });
    expect(await rpc.getIds('order', 1)).toHaveLength(1);
  });

  it('kafkaTransport: an unknown tag reaches the caller as UNKNOWN_BIZ_TAG', async () => {
    const client = createIdmintClient({ transport: kafkaTransport(rpc) });
    await expect(client.next('no-such-tag')).rejects.toMatchObject({ code: 'UNKNOWN_BIZ_TAG' });
    await client.close();
  });

  it("kafkaPoolTransport: 2 clients share the tag's pool group and take 16,001 IDs with zero duplicates", async () => {
    const bizTag = uniqueName('client-pool');
    await ts.store.createBiz({ bizTag, pool: 'kafka', step: 1000 });
    const sink = new KafkaPoolSink({ signer: testSigner, kafka: testKafkaOptions('sdk-test-refill'), blockSize: 100, partitions: 2 });
    let highest = 0;
    const publish = async (): Promise<void> => {
      const segment = await ts.store.allocate(bizTag, 1000);
      await sink.push(segment);
      highest = Math.max(highest, segment.end);
    };
    // The refill's part, as the Kafka pool watch plays it: a partition under 4 blocks gets the next
    // segment (the sink sends each block to the partition with the fewest unconsumed). Without it a
    // client can starve beside plenty: the first to join may hold both partitions, drain one, and
    // keep the other after the rebalance, where it sits unread once its own caller is done (seen in
    // CI: the second client got the 13 blocks left of the drained partition, 3,227 IDs, then nothing).
    let refilling = true;
    const refill = (async () => {
      while (refilling) {
        const state = await sink.state(bizTag, 0);
        if (state && Math.min(...state.unconsumed) < 4 && highest < 60_000) await publish();
        else await new Promise((r) => setTimeout(r, 100));
      }
    })();
    try {
      for (let i = 0; i < 25; i++) await publish();
      const clients = [0, 1].map(() =>
        createIdmintClient({
          transport: kafkaPoolTransport({ verifyKey: TEST_VERIFY_KEY, kafka: testKafkaOptions('sdk-pool'), takeTimeoutMs: 5000 }),
          batchSize: 100,
          maxBatchSize: 1000,
          timeoutMs: 60_000,
        }),
      );
      // The first joins alone and holds both partitions; the second's join moves one while the first takes.
      const first = await clients[0]!.next(bizTag);
      const ids = [first, ...(await Promise.all(clients.map((c) => drain(c, bizTag, 8000, 8)))).flat()];
      refilling = false;
      await refill;
      expect(ids).toHaveLength(16_001);
      expectNoDuplicates(ids);
      // Every ID came from a segment this tag allocated.
      expect(ids.every((id) => id >= 1n && id <= BigInt(highest))).toBe(true);
      await Promise.all(clients.map((c) => c.close()));
      // Committed before hand-out: what the clients held is gone, the rest is still in the pool.
      expect(await sink.depth(bizTag, 0)).toBeLessThanOrEqual(highest - 16_001);
    } finally {
      refilling = false;
      await refill.catch(() => undefined);
      await sink.deleteTopics(bizTag).catch(() => undefined);
      await sink.close();
    }
  });

  it('kafkaPoolTransport: a dry pool topic answers POOL_EMPTY', async () => {
    const bizTag = uniqueName('client-dry');
    const sink = new KafkaPoolSink({ signer: testSigner, kafka: testKafkaOptions('sdk-test-refill'), partitions: 1 });
    try {
      await ts.store.createBiz({ bizTag, pool: 'kafka', step: 10 });
      await sink.push(await ts.store.allocate(bizTag, 10));
      const client = createIdmintClient({
        transport: kafkaPoolTransport({ verifyKey: TEST_VERIFY_KEY, kafka: testKafkaOptions('sdk-dry'), takeTimeoutMs: 2000 }),
        batchSize: 10,
        timeoutMs: 60_000,
      });
      expect(await client.nextMany(bizTag, 10)).toHaveLength(10);
      await expect(client.next(bizTag)).rejects.toMatchObject({ code: 'POOL_EMPTY' });
      await client.close();
    } finally {
      await sink.deleteTopics(bizTag).catch(() => undefined);
      await sink.close();
    }
  });
});
