import type { Kafka, Producer } from 'kafkajs';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KafkaPoolConsumer } from '../../../src/client/kafka/pool-consumer.js';
import { createKafkaClient } from '../../../src/client/kafka/rpc-client.js';
import { kafkaPoolTransport } from '../../../src/client/kafka/transports.js';
import { encodePoolBlock, encodeIdsReply, decodeRequest } from '../../../src/kafka/messages.js';
import { createResponder, type Responder } from '../../../src/kafka/responder.js';
import { blockBytes, generateSigningKey, replyBytes, type SigningKey } from '../../../src/kafka/signing.js';
import { kafkaNames, poolTopic } from '../../../src/kafka/names.js';
import { KafkaPoolSink } from '../../../src/pool/kafka/sink.js';
import { createTopic, kafkaPoolTags, testKafka } from '../../support/kafka.js';
import { uniqueName } from '../../support/names.js';
import { until } from '../../support/poll.js';
import { TEST_SIGNING_KEY, TEST_VERIFY_KEY, testSigner } from '../../support/signing.js';
import { storeWithDispenser, type DispensingStore } from '../../support/store.js';
import { expectNoDuplicates } from '../../support/unique.js';

// Issue 40, "Kafka you cannot forge", on the real broker: whoever can write idmint's topics (a
// plain Kafka client here) tries every attack of the outside probe. Before, a forged block was
// handed out by default, a genuine block copied back or into another partition was handed out
// again (3.6 M duplicates in 43 M IDs), and forged replies won the race (211,005 in 398,001).
describe('signed Kafka pool blocks and replies: what an attacker with write access cannot do', () => {
  let kafka: Kafka;
  let ts: DispensingStore;
  let sink: KafkaPoolSink;
  let attacker: Producer;
  const tags = kafkaPoolTags(() => ts.store);

  beforeAll(async () => {
    kafka = testKafka('signatures');
    ts = await storeWithDispenser('sig');
    sink = new KafkaPoolSink({ signer: testSigner, kafka, blockSize: 100, partitions: 4 });
    attacker = kafka.producer();
    await attacker.connect();
  });

  afterAll(async () => {
    await attacker?.disconnect();
    for (const tag of tags.made) await sink.deleteTopics(tag).catch(() => undefined);
    await sink.close();
    await ts?.close();
  });

  /** Every block the topic holds, with its partition and value (what an attacker who can read it copies). */
  async function readAll(topic: string, partitions: number): Promise<Array<{ partition: number; value: Buffer }>> {
    const out: Array<{ partition: number; value: Buffer }> = [];
    const consumer = kafka.consumer({ groupId: uniqueName('attacker') });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    const admin = kafka.admin();
    await admin.connect();
    const ends = await admin.fetchTopicOffsets(topic);
    await admin.disconnect();
    const total = ends.reduce((n, p) => n + Number(p.high), 0);
    await consumer.run({ eachMessage: async ({ partition, message }) => void out.push({ partition, value: message.value! }) });
    await until('the attacker to read the topic', () => out.length >= total, { timeoutMs: 30_000 });
    await consumer.disconnect();
    expect(partitions).toBeGreaterThan(0);
    return out;
  }

  /** Takes until `count` IDs or the topic runs dry; returns them. */
  async function drain(consumer: KafkaPoolConsumer, count: number): Promise<number[]> {
    return (await consumer.take(count, { timeoutMs: 5000 })).map(Number);
  }

  it('forged, unsigned, wrongly signed, relabelled and malformed blocks are never handed out, and are counted by why', async () => {
    const bizTag = await tags.create('forged');
    const other = await tags.create('forged-other');
    await sink.push(await ts.store.allocate(bizTag, 1000));
    const topic = poolTopic(bizTag);
    const wrong = generateSigningKey();
    const signed = (key: SigningKey, place: Parameters<typeof blockBytes>[0]) =>
      encodePoolBlock(place.bizTag, BigInt(place.start), BigInt(place.end), {
        seq: place.seq,
        at: place.at,
        signature: { kid: key.kid, sig: key.sign(blockBytes(place)) },
      });
    const at = (start: number, end: number, over: Partial<Parameters<typeof blockBytes>[0]> = {}) => ({
      namespace: '',
      topic,
      partition: 0,
      seq: String(start),
      at: String(Date.now()),
      bizTag,
      shard: 0,
      start: String(start),
      end: String(end),
      ...over,
    });
    await attacker.send({
      topic,
      messages: [
        // The probe's forgery, unsigned.
        { partition: 0, value: Buffer.from(JSON.stringify({ v: 1, bizTag, start: '1', end: '5' })) },
        { partition: 0, value: signed(wrong, at(5001, 5005)) },
        // Signed by the deployment for another tag, then relabelled to this one.
        {
          partition: 0,
          value: (() => {
            const p = at(5006, 5009, { bizTag: other, topic: poolTopic(other) });
            return encodePoolBlock(bizTag, 5006, 5009, {
              seq: p.seq,
              at: p.at,
              signature: { kid: TEST_SIGNING_KEY.kid, sig: TEST_SIGNING_KEY.sign(blockBytes(p)) },
            });
          })(),
        },
        // Genuinely signed for this very place, but three days ago (a copy kept for later).
        { partition: 0, value: signed(TEST_SIGNING_KEY, at(5100, 5200, { at: String(Date.now() - 3 * 86_400_000) })) },
        // Genuinely signed for another namespace's topic.
        { partition: 0, value: signed(TEST_SIGNING_KEY, at(5010, 5020, { namespace: 'eu', topic: kafkaNames('eu').poolTopic(bizTag) })) },
        // Malformed: start above end, an end near 2^63, not JSON.
        { partition: 1, value: Buffer.from(JSON.stringify({ v: 1, bizTag, start: '7000', end: '6000' })) },
        { partition: 1, value: signed(TEST_SIGNING_KEY, at(9007199254740000, 9223372036854775000, { partition: 1 })) },
        { partition: 2, value: Buffer.from('not json at all') },
      ],
    });
    const consumer = new KafkaPoolConsumer({ verifyKey: TEST_VERIFY_KEY, kafka, bizTag });
    try {
      const ids = await drain(consumer, 5000);
      expect(ids).toHaveLength(1000);
      expectNoDuplicates(ids);
      expect(ids.filter((id) => id > 1000)).toEqual([]);
      await until('eight drops counted', () => consumer.rejectedBlocks === 8, { detail: () => JSON.stringify(consumer.rejected) });
      expect(consumer.rejected).toMatchObject({
        unsigned: 1,
        'signed by an unknown key': 1,
        malformed: 2,
        'beyond 2^53': 1,
        'signed too long ago (or ahead of this clock)': 1,
      });
      expect(consumer.rejected['badly signed, or signed for another place']).toBe(2);
    } finally {
      await consumer.close();
    }
  }, 90_000);

  it('a genuine block copied back into its partition after a consumer restart, or into another partition while consumers run, is never handed out again', async () => {
    const bizTag = await tags.create('replay');
    for (let i = 0; i < 4; i++) await sink.push(await ts.store.allocate(bizTag, 1000));
    const topic = poolTopic(bizTag);
    const genuine = await readAll(topic, 4);
    const seen: number[] = [];
    // The first consumer takes everything, then stops (a restart: its group's committed offsets stay).
    const first = new KafkaPoolConsumer({ verifyKey: TEST_VERIFY_KEY, kafka, bizTag });
    seen.push(...(await drain(first, 4000)));
    await first.close();
    expect(seen).toHaveLength(4000);
    // The attacker copies every genuine block back into its own partition, and into the next one.
    await attacker.send({
      topic,
      messages: genuine.flatMap((b) => [
        { partition: b.partition, value: b.value },
        { partition: (b.partition + 1) % 4, value: b.value },
      ]),
    });
    // And a fresh refill, so the consumers have something genuine to take.
    await sink.push(await ts.store.allocate(bizTag, 1000));
    const two = [0, 1].map(() => new KafkaPoolConsumer({ verifyKey: TEST_VERIFY_KEY, kafka, bizTag, bufferBlocks: 2 }));
    try {
      const taken = await Promise.all(two.map((c) => drain(c, 10_000)));
      for (const t of taken) seen.push(...t);
      expectNoDuplicates(seen, 'IDs across the replays');
      expect(seen).toHaveLength(5000);
      const drops = two.reduce((n, c) => n + c.rejectedBlocks, 0);
      expect(drops, JSON.stringify(two.map((c) => c.rejected))).toBe(genuine.length * 2);
    } finally {
      await Promise.all(two.map((c) => c.close()));
    }
  }, 120_000);

  it('forged replies racing the responder are ignored: the client waits for the signed one (0 IDs twice)', async () => {
    const requestTopic = uniqueName('sig.requests');
    await createTopic(kafka, requestTopic, 2);
    await ts.store.createBiz({ bizTag: 'raced', step: 1000 });
    const responder: Responder = createResponder({
      signer: testSigner,
      kafka,
      dispenser: ts.dispenser,
      groupId: uniqueName('sig.responders'),
      requestTopic,
      registry: new Registry(),
    });
    await responder.start();
    // The attacker reads every request and answers first with IDs of its choosing: 1..count, always.
    const forger = kafka.consumer({ groupId: uniqueName('forger') });
    await forger.connect();
    await forger.subscribe({ topic: requestTopic, fromBeginning: true });
    let forged = 0;
    await forger.run({
      eachMessage: async ({ message }) => {
        const decoded = decodeRequest(message.value, { maxCount: 10_000, maxBytes: 4096 });
        if (!decoded.ok) return;
        const { id, replyTo, count } = decoded.request;
        const ids = Array.from({ length: count }, (_, i) => String(i + 1));
        const bad = generateSigningKey();
        await attacker.send({
          topic: replyTo,
          messages: [
            { key: id, value: encodeIdsReply(id, ids, 'pool') },
            {
              key: id,
              value: encodeIdsReply(id, ids, 'pool', undefined, {
                kid: bad.kid,
                sig: bad.sign(replyBytes(replyTo, id, { kind: 'ids', source: 'pool', format: '', ids })),
              }),
            },
            // A genuine signature lifted from another request's reply does not fit this one.
            {
              key: id,
              value: encodeIdsReply(id, ids, 'pool', undefined, {
                kid: TEST_SIGNING_KEY.kid,
                sig: TEST_SIGNING_KEY.sign(replyBytes(replyTo, 'another-id', { kind: 'ids', source: 'pool', format: '', ids })),
              }),
            },
          ],
        });
        forged += 3;
      },
    });
    const client = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, requestTopic, clientId: 'sig-raced', timeoutMs: 20_000 });
    try {
      await client.start();
      const ids: string[] = [];
      for (let round = 0; round < 30; round++) ids.push(...(await Promise.all(Array.from({ length: 10 }, () => client.getIds('raced', 100)))).flat());
      expect(ids).toHaveLength(30_000);
      expectNoDuplicates(ids);
      expect(forged).toBeGreaterThan(0);
      expect(client.rejectedReplies).toBeGreaterThan(0);
    } finally {
      await client.close();
      await forger.disconnect();
      await responder.close();
    }
  }, 120_000);

  it('a rotation: blocks signed by the next key are served by consumers given both keys, and dropped by one given only the old key', async () => {
    const bizTag = await tags.create('rotate');
    const next = generateSigningKey();
    let signing: SigningKey = TEST_SIGNING_KEY;
    const rotating = new KafkaPoolSink({ signer: () => signing, kafka, blockSize: 100, partitions: 1 });
    try {
      await rotating.push(await ts.store.allocate(bizTag, 300));
      signing = next;
      await rotating.push(await ts.store.allocate(bizTag, 300));
      const both = new KafkaPoolConsumer({ verifyKey: [TEST_VERIFY_KEY, next.publicKey], kafka, bizTag });
      try {
        const ids = await drain(both, 1000);
        expect(ids).toHaveLength(600);
        expectNoDuplicates(ids);
        expect(both.rejectedBlocks).toBe(0);
      } finally {
        await both.close();
      }
      signing = TEST_SIGNING_KEY;
      await rotating.push(await ts.store.allocate(bizTag, 300));
      signing = next;
      await rotating.push(await ts.store.allocate(bizTag, 300));
      const old = new KafkaPoolConsumer({ verifyKey: TEST_VERIFY_KEY, kafka, bizTag });
      try {
        expect(await drain(old, 1000)).toHaveLength(300);
        const blocks = 300 / rotating.blockIdsFor(300);
        await until("the next key's blocks dropped", () => old.rejected['signed by an unknown key'] === blocks, { detail: () => JSON.stringify(old.rejected) });
      } finally {
        await old.close();
      }
    } finally {
      await rotating.close();
    }
  }, 90_000);

  it('secure by default: an SDK reader without a verify key is refused at construction, naming what to do', () => {
    const saved = process.env.IDMINT_VERIFY_KEY;
    delete process.env.IDMINT_VERIFY_KEY;
    try {
      expect(() => kafkaPoolTransport({ kafka })).toThrow(/verifyKey .*idmint keys public.*insecureSkipVerify/);
      expect(() => createKafkaClient({ kafka })).toThrow(/verifyKey/);
      expect(() => new KafkaPoolConsumer({ kafka, bizTag: 'order' })).toThrow(/verifyKey/);
      expect(() => new KafkaPoolConsumer({ kafka, bizTag: 'order', blockKey: 'an-old-hmac-key-0123456789' } as never)).toThrow(
        /blockKey .*replaced by verifyKey/,
      );
      expect(() => kafkaPoolTransport({ kafka, verifyKey: 'ed25519:0000000000000000:AAAA' })).toThrow(/not an idmint public key/);
      process.env.IDMINT_VERIFY_KEY = TEST_VERIFY_KEY;
      expect(() => kafkaPoolTransport({ kafka })).not.toThrow();
      delete process.env.IDMINT_VERIFY_KEY;
      expect(() => kafkaPoolTransport({ kafka, insecureSkipVerify: true })).not.toThrow();
    } finally {
      if (saved === undefined) delete process.env.IDMINT_VERIFY_KEY;
      else process.env.IDMINT_VERIFY_KEY = saved;
    }
  });
});
