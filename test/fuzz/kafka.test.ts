import fc from 'fast-check';
import { Partitioners, type Consumer, type Kafka, type Producer } from 'kafkajs';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/core/errors.js';
import { createKafkaClient, type IdmintKafkaClient } from '../../src/client/kafka/rpc-client.js';
import { waitForGroupJoin } from '../../src/kafka/kafkajs/group.js';
import { decodeReply } from '../../src/kafka/messages.js';
import { createResponder, type Responder } from '../../src/kafka/responder.js';
import { createTopic, deleteTopics, testKafka } from '../support/kafka.js';
import { storeWithDispenser, type DispensingStore } from '../support/store.js';
import { uniqueName } from '../support/names.js';
import { expectNoDuplicates } from '../support/unique.js';
import { FUZZ_RUNS, FUZZ_SEED, STACK_TRACE } from './runs.js';
import { sleep } from '../support/poll.js';
import { TEST_VERIFY_KEY, testSigner } from '../support/signing.js';

// Random bytes, wrong types, huge and negative values, bad replyTo and deadlines, sent to a real
// responder on the real broker. It must answer every answerable message with a well-formed reply,
// never crash, and keep serving.
describe('Kafka responder under fuzzing (fast-check, real broker)', () => {
  let kafka: Kafka;
  let ts: DispensingStore;
  let responder: Responder;
  let client: IdmintKafkaClient;
  let producer: Producer;
  let replies: Consumer;
  const raw: Array<Buffer | null> = [];
  const requestTopic = uniqueName('idmint.requests.fuzz');
  const replyTopic = uniqueName('idmint.replies.fuzz');
  const groupId = uniqueName('idmint.responders.fuzz');

  beforeAll(async () => {
    kafka = testKafka('idmint-fuzz');
    ts = await storeWithDispenser();
    await ts.store.createBiz({ bizTag: 'order' });
    await createTopic(kafka, requestTopic, 2);
    await createTopic(kafka, replyTopic);
    responder = createResponder({ signer: testSigner, kafka, dispenser: ts.dispenser, groupId, requestTopic, registry: new Registry(), maxCount: 1000 });
    await responder.start();
    client = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, requestTopic, clientId: 'fuzz' });
    await client.start();
    producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
    replies = kafka.consumer({ groupId: uniqueName('fuzz-replies') });
    const joined = waitForGroupJoin(replies, 30_000);
    await replies.connect();
    await replies.subscribe({ topic: replyTopic, fromBeginning: true });
    await replies.run({ eachMessage: async ({ message }) => void raw.push(message.value) });
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

  it('answers what it can with well-formed replies, skips the rest, and keeps serving', async () => {
    const anything = fc.oneof(fc.jsonValue({ maxDepth: 1 }), fc.constant(undefined), fc.double(), fc.bigInt().map(String), fc.string({ maxLength: 30 }));
    const count = fc.oneof(fc.integer({ min: 1, max: 50 }), fc.constantFrom(0, -1, 1.5, 1001, 2 ** 53, Number.MAX_VALUE, '3', null));
    const deadline = fc.oneof(fc.constant('future'), fc.constantFrom(-1, 0, 1, 'tomorrow', 2 ** 64, null));
    const replyTo = fc.oneof(fc.constant(replyTopic), fc.constant(replyTopic), fc.constantFrom(requestTopic, 'no such/topic', '', 'x'.repeat(300), 42, null));
    const request = fc.record(
      {
        v: fc.oneof(fc.constant(1), fc.constant(1), anything),
        id: fc.oneof(fc.uuid(), anything),
        bizTag: fc.oneof(fc.constantFrom('order', 'ghost', 'Bad Tag', ''), anything),
        count,
        replyTo,
        deadline,
        extra: anything,
      },
      { requiredKeys: [] },
    );
    const message = fc.oneof(
      {
        weight: 6,
        arbitrary: request.map((r) => Buffer.from(JSON.stringify({ ...r, deadline: r.deadline === 'future' ? Date.now() + 60_000 : r.deadline }) ?? '')),
      },
      { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)) },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          Buffer.alloc(0),
          Buffer.from('{"v":1,'),
          Buffer.from(`{"v":1,"id":"big","replyTo":"${replyTopic}","pad":"${'x'.repeat(200_000)}"}`),
        ),
      },
    );
    const messages = fc.sample(message, { numRuns: FUZZ_RUNS, ...(FUZZ_SEED === undefined ? {} : { seed: FUZZ_SEED }) });
    // Batches under the broker's 1 MB message limit, however many 200 KB messages the sample drew.
    let batch: Buffer[] = [];
    let bytes = 0;
    for (const value of [...messages, null]) {
      if (value === null || batch.length === 100 || bytes + value.length > 500_000) {
        if (batch.length > 0) await producer.send({ topic: requestTopic, messages: batch.map((v) => ({ value: v })) });
        batch = [];
        bytes = 0;
      }
      if (value === null) break;
      batch.push(value);
      bytes += value.length;
    }
    // A valid request after all of them is still answered; then every reply that arrived is well formed.
    const ids = await client.getIds('order', 5, { timeoutMs: 60_000 });
    expect(ids).toHaveLength(5);
    await sleep(1000); // replies to the fuzzed requests may still be on their way: give them time to arrive
    const codes = new Set(Object.keys(ERROR_CODES));
    const answered: string[] = [];
    for (const value of raw) {
      const text = value?.toString('utf8') ?? '';
      expect(text).not.toMatch(STACK_TRACE);
      const reply = decodeReply(value);
      expect(reply, text.slice(0, 300)).not.toBeNull();
      if (reply && 'error' in reply) expect(codes.has(reply.error.code)).toBe(true);
      if (reply && 'ids' in reply) answered.push(...reply.ids);
    }
    // Random valid requests got real IDs: none repeated, none of the client's repeated either.
    expectNoDuplicates([...answered, ...ids]);
    expect(raw.length).toBeGreaterThan(0);
  });
});
