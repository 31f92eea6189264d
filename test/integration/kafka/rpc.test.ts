import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Partitioners } from 'kafkajs';
import type { Kafka } from 'kafkajs';
import { Registry } from 'prom-client';
import { createResponder } from '../../../src/kafka/responder.js';
import type { Responder } from '../../../src/kafka/responder.js';
import { createKafkaClient } from '../../../src/client/kafka/rpc-client.js';
import { waitForGroupJoin } from '../../../src/kafka/kafkajs/group.js';
import { decodeRequest, encodeIdsReply } from '../../../src/kafka/messages.js';
import type { IdmintKafkaClient } from '../../../src/client/kafka/rpc-client.js';
import { createTopic, deleteTopics, testKafka } from '../../support/kafka.js';
import { storeWithDispenser, type DispensingStore } from '../../support/store.js';
import { uniqueName } from '../../support/names.js';
import { expectNoDuplicates } from '../../support/unique.js';
import { until } from '../../support/poll.js';
import { TEST_SIGNING_KEY, TEST_VERIFY_KEY, testSigner } from '../../support/signing.js';
import { replyBytes } from '../../../src/kafka/signing.js';

// Request/reply against real Kafka and a real dispenser over Postgres; names unique per file.
describe('Kafka request/reply', () => {
  let kafka: Kafka;
  let ts: DispensingStore;
  let responder: Responder;
  let client: IdmintKafkaClient;
  const registry = new Registry();
  const requestTopic = uniqueName('idmint.requests.test');
  const groupId = uniqueName('idmint.responders.test');

  beforeAll(async () => {
    kafka = testKafka();
    ts = await storeWithDispenser();
    await ts.store.createBiz({ bizTag: 'order', step: 1000 });
    await createTopic(kafka, requestTopic, 4);
    responder = createResponder({ signer: testSigner, kafka, dispenser: ts.dispenser, groupId, requestTopic, registry });
    await responder.start();
    client = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, requestTopic, clientId: 'rpc-test' });
    await client.start();
  });

  afterAll(async () => {
    await client?.close();
    await responder?.close();
    await deleteTopics(kafka, [requestTopic]);
    await ts?.close();
  });

  it.each([1, 100, 10_000])('a client asks for %i IDs and gets them, as unique decimal strings', async (count) => {
    const ids = await client.getIds('order', count, { timeoutMs: 20_000 });
    expect(ids).toHaveLength(count);
    for (const id of ids) expect(id).toMatch(/^[1-9]\d*$/);
    expectNoDuplicates(ids);
    expect(ids.length).toBe(count);
  });

  it('offers the IDs as bigint, or with their source', async () => {
    const ids = await client.getBigIntIds('order', 3);
    expect(ids.every((id) => typeof id === 'bigint' && id > 0n)).toBe(true);
    // The real dispenser serves a segment tag from its in-memory double buffer: source "pool".
    expect(await client.get('order', 2)).toMatchObject({ bizTag: 'order', source: 'pool', ids: [expect.any(String), expect.any(String)] });
  });

  it('answers an unknown tag with UNKNOWN_BIZ_TAG', async () => {
    await expect(client.getIds('no-such-tag', 1)).rejects.toMatchObject({ code: 'UNKNOWN_BIZ_TAG' });
  });

  it('times out with TIMEOUT when nobody answers', async () => {
    const silentTopic = uniqueName('idmint.requests.silent');
    await createTopic(kafka, silentTopic);
    const lonely = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, requestTopic: silentTopic, clientId: 'lonely' });
    try {
      await expect(lonely.getIds('order', 1, { timeoutMs: 300 })).rejects.toMatchObject({ code: 'TIMEOUT' });
      expect(lonely.inFlight).toBe(0);
    } finally {
      await lonely.close();
      await deleteTopics(kafka, [silentTopic]);
    }
  });

  it('retries a timed-out request under a new request id each time', async () => {
    const silentTopic = uniqueName('idmint.requests.retry');
    await createTopic(kafka, silentTopic);
    const retrying = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, requestTopic: silentTopic, clientId: 'retrying', retries: 2 });
    const seen = kafka.consumer({ groupId: uniqueName('retry-watch') });
    const ids: string[] = [];
    try {
      await expect(retrying.getIds('order', 1, { timeoutMs: 200 })).rejects.toMatchObject({ code: 'TIMEOUT' });
      await seen.connect();
      await seen.subscribe({ topic: silentTopic, fromBeginning: true });
      await seen.run({ eachMessage: async ({ message }) => void ids.push((JSON.parse(message.value!.toString()) as { id: string }).id) });
      await until('three requests on the topic', () => ids.length >= 3, { timeoutMs: 10_000 });
      expect(ids).toHaveLength(3);
      expectNoDuplicates(ids, 'request ids');
    } finally {
      await seen.disconnect();
      await retrying.close();
      await deleteTopics(kafka, [silentTopic]);
    }
  });

  it("keeps the first reply for a request id and drops a second (a redelivered request's)", async () => {
    const silentTopic = uniqueName('idmint.requests.dup');
    await createTopic(kafka, silentTopic);
    const dupClient = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, requestTopic: silentTopic, clientId: 'dup' });
    const fake = kafka.consumer({ groupId: uniqueName('fake-responder') });
    const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    try {
      await dupClient.start();
      await producer.connect();
      // A stand-in responder that answers every request twice, with different IDs.
      const joined = waitForGroupJoin(fake, 30_000);
      await fake.connect();
      await fake.subscribe({ topic: silentTopic, fromBeginning: true });
      await fake.run({
        eachMessage: async ({ message }) => {
          const req = decodeRequest(message.value, { maxCount: 10, maxBytes: 4096 });
          if (!req.ok) return;
          const { id, replyTo } = req.request;
          const signed = (ids: string[]) =>
            encodeIdsReply(id, ids, 'pool', undefined, {
              kid: TEST_SIGNING_KEY.kid,
              sig: TEST_SIGNING_KEY.sign(replyBytes(replyTo, id, { kind: 'ids', source: 'pool', format: '', ids })),
            });
          await producer.send({ topic: replyTo, messages: [{ key: id, value: signed(['11', '12']) }] });
          await producer.send({ topic: replyTo, messages: [{ key: id, value: signed(['21', '22']) }] });
        },
      });
      await joined;
      expect(await dupClient.getIds('order', 2, { timeoutMs: 10_000 })).toEqual(['11', '12']);
      await until('the second reply to be dropped', () => dupClient.droppedReplies >= 1, { timeoutMs: 5000 });
      expect(dupClient.droppedReplies).toBe(1);
    } finally {
      await fake.disconnect();
      await producer.disconnect();
      await dupClient.close();
      await deleteTopics(kafka, [silentTopic]);
    }
  });

  it('refuses to start when the request topic is missing, naming the command that fixes it', async () => {
    const orphan = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, requestTopic: uniqueName('idmint.requests.missing') });
    await expect(orphan.start()).rejects.toThrow(/missing: run `idmint kafka init`/);
    await orphan.close();
  });

  it('a closed client deletes its reply topic, and the responder still answers clients that come after it', async () => {
    const admin = kafka.admin();
    await admin.connect();
    try {
      for (let round = 0; round < 3; round++) {
        const shortLived = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, requestTopic, clientId: `short-${round}` });
        expect(await shortLived.getIds('order', 2, { timeoutMs: 10_000 })).toHaveLength(2);
        await shortLived.close();
        expect(await admin.listTopics()).not.toContain(shortLived.replyTopic);
      }
      // The responder's producer has now sent to three deleted topics; the long-lived client is still served.
      expect(await client.getIds('order', 2, { timeoutMs: 10_000 })).toHaveLength(2);
    } finally {
      await admin.disconnect();
    }
  });

  it('50 concurrent clients x 200 requests: zero duplicates across all replies', async () => {
    const clients = Array.from({ length: 50 }, (_, i) =>
      createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, requestTopic, clientId: `many-${i}`, timeoutMs: 30_000 }),
    );
    try {
      await Promise.all(clients.map((c) => c.start()));
      const perClient = await Promise.all(
        clients.map(async (c) => {
          const got: string[] = [];
          // 10 requests in flight per client, 500 overall.
          await Promise.all(
            Array.from({ length: 10 }, async () => {
              for (let r = 0; r < 20; r++) got.push(...(await c.getIds('order', 5)));
            }),
          );
          return got;
        }),
      );
      const all = perClient.flat();
      expect(all).toHaveLength(50 * 200 * 5);
      expectNoDuplicates(all);
      expect(all.length).toBe(50 * 200 * 5);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  }, 180_000);

  it('counts requests in its metrics', async () => {
    const text = await registry.getSingleMetricAsString('idmint_kafka_requests_total');
    expect(text).toMatch(/outcome="ok"} [1-9]/);
    expect(await registry.getSingleMetricAsString('idmint_kafka_request_errors_total')).toMatch(/code="UNKNOWN_BIZ_TAG"} [1-9]/);
  });
});
