import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Partitioners } from 'kafkajs';
import type { Consumer, Kafka, Producer } from 'kafkajs';
import { Registry } from 'prom-client';
import { createResponder } from '../../../src/kafka/responder.js';
import type { Responder } from '../../../src/kafka/responder.js';
import { createKafkaClient } from '../../../src/client/kafka/rpc-client.js';
import type { IdmintKafkaClient } from '../../../src/client/kafka/rpc-client.js';
import { decodeReply } from '../../../src/kafka/messages.js';
import type { IdReply } from '../../../src/kafka/messages.js';
import { waitForGroupJoin } from '../../../src/kafka/kafkajs/group.js';
import { createTopic, deleteTopics, testKafka } from '../../support/kafka.js';
import { storeWithDispenser, type DispensingStore } from '../../support/store.js';
import { uniqueName } from '../../support/names.js';
import { until, untilValue } from '../../support/poll.js';
import { TEST_VERIFY_KEY, testSigner } from '../../support/signing.js';

// Every malformed kind: answered with an error when replyTo is readable, skipped otherwise;
// either way the responder keeps serving the valid request that follows.
describe('Kafka responder and malformed requests', () => {
  let kafka: Kafka;
  let ts: DispensingStore;
  let responder: Responder;
  let client: IdmintKafkaClient;
  let producer: Producer;
  let replies: Consumer;
  const received = new Map<string, IdReply>();
  const registry = new Registry();
  const requestTopic = uniqueName('idmint.requests.bad');
  const replyTopic = uniqueName('idmint.replies.raw');
  const groupId = uniqueName('idmint.responders.bad');

  beforeAll(async () => {
    kafka = testKafka();
    ts = await storeWithDispenser();
    await ts.store.createBiz({ bizTag: 'order' });
    await createTopic(kafka, requestTopic, 2);
    await createTopic(kafka, replyTopic);
    responder = createResponder({ signer: testSigner, kafka, dispenser: ts.dispenser, groupId, requestTopic, registry, maxCount: 500 });
    await responder.start();
    client = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, requestTopic, clientId: 'bad-test' });
    await client.start();
    producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
    replies = kafka.consumer({ groupId: uniqueName('raw-replies') });
    const joined = waitForGroupJoin(replies, 30_000);
    await replies.connect();
    await replies.subscribe({ topic: replyTopic, fromBeginning: true });
    await replies.run({
      eachMessage: async ({ message }) => {
        const reply = decodeReply(message.value);
        if (reply) received.set(reply.id, reply);
      },
    });
    await joined;
  });

  afterAll(async () => {
    await replies?.disconnect();
    await producer?.disconnect();
    await client?.close();
    await responder?.close();
    await deleteTopics(kafka, [requestTopic, replyTopic]);
    await ts?.close();
  });

  const good = (id: string) => ({ v: 1, id, bizTag: 'order', count: 3, replyTo: replyTopic, deadline: Date.now() + 60_000 });

  async function waitForReply(id: string): Promise<IdReply> {
    await until(`a reply to ${id}`, () => received.has(id), { timeoutMs: 10_000 });
    return received.get(id)!;
  }

  async function metric(outcome: string): Promise<number> {
    const values = (await registry.getSingleMetric('idmint_kafka_requests_total')!.get()).values;
    return values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
  }

  /** The bad message and the next valid one may sit on different partitions: poll, do not assume order. */
  async function metricAbove(outcome: string, before: number): Promise<number> {
    return untilValue(
      `idmint_kafka_requests_total{outcome="${outcome}"} above ${before}`,
      () => metric(outcome),
      (n) => n > before,
      { timeoutMs: 10_000 },
    );
  }

  async function send(value: string | Buffer): Promise<void> {
    await producer.send({ topic: requestTopic, messages: [{ value }] });
  }

  async function stillServes(): Promise<void> {
    const ids = await client.getIds('order', 2, { timeoutMs: 10_000 });
    expect(ids).toHaveLength(2);
  }

  it.each([
    ['wrong version', (id: string) => ({ ...good(id), v: 2 }), 'BAD_REQUEST', /version/],
    ['missing bizTag', (id: string) => ({ ...good(id), bizTag: undefined }), 'BAD_REQUEST', /bizTag/],
    ['count as a string', (id: string) => ({ ...good(id), count: '3' }), 'BAD_REQUEST', /count/],
    ['deadline wrong-typed', (id: string) => ({ ...good(id), deadline: 'tomorrow' }), 'BAD_REQUEST', /deadline/],
    ['count zero', (id: string) => ({ ...good(id), count: 0 }), 'BAD_REQUEST', /count/],
    ['count above the maximum', (id: string) => ({ ...good(id), count: 501 }), 'BAD_REQUEST', /exceeds the maximum 500/],
    ['unknown tag', (id: string) => ({ ...good(id), bizTag: 'ghost' }), 'UNKNOWN_BIZ_TAG', /ghost/],
    ['oversized', (id: string) => ({ ...good(id), padding: 'x'.repeat(8000) }), 'BAD_REQUEST', /exceeds the 4096-byte limit/],
  ])('%s: gets an error reply, and the responder keeps serving', async (name, make, code, message) => {
    const id = uniqueName(name.replace(/\W+/g, '-'));
    await send(JSON.stringify(make(id)));
    const reply = await waitForReply(id);
    expect(reply).toMatchObject({ id, error: { code } });
    if ('error' in reply) expect(reply.error.message).toMatch(message);
    await stillServes();
  });

  it.each([
    ['not JSON', '{"v":1,"id":"x",'],
    ['a JSON string', '"hello"'],
    ['no replyTo', JSON.stringify({ v: 1, id: 'x', bizTag: 'order', count: 1, deadline: Date.now() + 60_000 })],
    ['a replyTo that is not a topic name', JSON.stringify({ v: 1, id: 'x', bizTag: 'order', count: 1, replyTo: 'no such/topic', deadline: 1 })],
  ])('%s: is logged and skipped, and the responder keeps serving', async (_name, value) => {
    const before = await metric('unanswerable');
    await send(value);
    await stillServes();
    expect(await metricAbove('unanswerable', before)).toBeGreaterThan(before);
  });

  it('an empty message is skipped, and the responder keeps serving', async () => {
    const before = await metric('unanswerable');
    await send(Buffer.alloc(0));
    await stillServes();
    expect(await metricAbove('unanswerable', before)).toBeGreaterThan(before);
  });

  it('a replyTo topic that does not exist is skipped, and the responder keeps serving', async () => {
    const before = await metric('unanswerable');
    await send(JSON.stringify({ ...good('to-nowhere'), replyTo: uniqueName('idmint.replies.gone') }));
    await stillServes();
    expect(await metricAbove('unanswerable', before)).toBeGreaterThan(before);
  });

  it('a request past its deadline is dropped unanswered and counted', async () => {
    const before = await metric('expired');
    const id = uniqueName('late');
    await send(JSON.stringify({ ...good(id), deadline: Date.now() - 1 }));
    await stillServes();
    expect(await metricAbove('expired', before)).toBeGreaterThan(before);
    expect(received.has(id)).toBe(false);
  });

  it('a valid raw request is answered with IDs on its replyTo, keyed by its id', async () => {
    const id = uniqueName('raw-ok');
    await send(JSON.stringify(good(id)));
    const reply = await waitForReply(id);
    expect(reply).toMatchObject({ id, source: expect.any(String) });
    if ('ids' in reply) expect(reply.ids).toHaveLength(3);
  });
});
