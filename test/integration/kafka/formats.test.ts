import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TagFormats } from '../../../src/app/formats.js';
import { createIdmintClient, kafkaTransport } from '../../../src/client/index.js';
import { Dispenser } from '../../../src/dispenser/dispenser.js';
import { MemoryPool } from '../../../src/dispenser/sources/memory.js';
import { createKafkaClient, type IdmintKafkaClient } from '../../../src/client/kafka/rpc-client.js';
import { createResponder, type Responder } from '../../../src/kafka/responder.js';
import { createTopic, deleteTopics, testKafka } from '../../support/kafka.js';
import { storeWithDispenser, type DispensingStore } from '../../support/store.js';
import { uniqueName } from '../../support/names.js';
import { expectNoDuplicates } from '../../support/unique.js';
import { TEST_VERIFY_KEY, testSigner } from '../../support/signing.js';

// Formatted tags over Kafka request/reply: replies carry the formatted IDs, which decode back to
// the tag's raw sequence; blocks of a formatted tag are refused with BAD_REQUEST.
describe('ID formats over Kafka (real broker)', () => {
  const kafka = testKafka('formats');
  const requestTopic = uniqueName('idmint-test.requests.formats');
  const formats = new TagFormats('kafka-formats-test-key-000001');
  let ts: DispensingStore;
  let memory: MemoryPool;
  let responder: Responder;
  let client: IdmintKafkaClient;

  beforeAll(async () => {
    ts = await storeWithDispenser();
    for (const format of ['obfuscated', 'sqids', 'obfuscated+base62'] as const) await ts.store.createBiz({ bizTag: `k-${format.replace('+', '-')}`, format });
    memory = new MemoryPool({ allocator: ts.store });
    const dispenser = new Dispenser({ store: ts.store, pools: { memory }, formats });
    await createTopic(kafka, requestTopic, 1);
    responder = createResponder({ signer: testSigner, kafka, dispenser, requestTopic, groupId: uniqueName('formats-responders'), registry: new Registry() });
    await responder.start();
    client = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, requestTopic, clientId: 'formats' });
    await client.start();
  });

  afterAll(async () => {
    await client?.close();
    await responder?.close();
    await memory?.close();
    await deleteTopics(kafka, [requestTopic]);
    await ts?.close();
  });

  it.each(['obfuscated', 'sqids', 'obfuscated+base62'])('%s: the reply carries formatted IDs that decode to the raw sequence', async (format) => {
    const bizTag = `k-${format.replace('+', '-')}`;
    const tag = (await ts.store.getBiz(bizTag))!;
    const codec = formats.codecFor(tag)!;
    const ids = await client.getIds(bizTag, 20);
    const raws = ids.map((id) => Number(codec.decode(id)));
    expect(raws).toEqual(Array.from({ length: 20 }, (_, i) => raws[0]! + i));
    expect(ids).not.toEqual(raws.map(String));
    await expect(client.getBlocks(bizTag, 10)).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });

  it.each(['obfuscated', 'sqids', 'obfuscated+base62'])(
    '%s: the reply names the format, and the SDK over Kafka hands the IDs out with nextString',
    async (format) => {
      const bizTag = `k-${format.replace('+', '-')}`;
      expect((await client.get(bizTag, 3)).format).toBe(format);
      const codec = formats.codecFor((await ts.store.getBiz(bizTag))!)!;
      const sdk = createIdmintClient({ transport: kafkaTransport(client), batchSize: 50 });
      try {
        const ids = await sdk.nextStrings(bizTag, 120);
        const distinct = ids.map((id) => codec.decode(id));
        expectNoDuplicates(distinct);
        expect(distinct).toHaveLength(120);
        if (format === 'obfuscated') expect(typeof (await sdk.next(bizTag))).toBe('bigint');
        else await expect(sdk.next(bizTag)).rejects.toMatchObject({ code: 'BAD_REQUEST' });
      } finally {
        await sdk.close();
      }
    },
  );
});
