import { afterAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../../../src/cli/main.js';
import { createResponder } from '../../../src/kafka/responder.js';
import { assertTopicsExist } from '../../../src/kafka/topics.js';
import { REQUEST_TOPIC, poolTopic } from '../../../src/kafka/names.js';
import { KafkaPoolSink } from '../../../src/pool/kafka/sink.js';
import type { IdDispenser } from '../../../src/core/ports.js';
import { deleteTopics, testKafka, topicAdmin } from '../../support/kafka.js';
import { uniqueName } from '../../support/names.js';
import { testSigner } from '../../support/signing.js';

// `idmint kafka init` and the start-up check that points at it.
describe('idmint kafka init and the start-up topic check', () => {
  const kafka = testKafka();
  const tags = [uniqueName('init-a'), uniqueName('init-b')];

  afterAll(async () => {
    await deleteTopics(
      kafka,
      tags.map((t) => poolTopic(t)),
    );
  });

  it('creates the request topic and the named pool topics, and is idempotent', async () => {
    const admin = kafka.admin();
    await admin.connect();
    try {
      await expect(
        assertTopicsExist(
          topicAdmin(kafka),
          tags.map((t) => poolTopic(t)),
        ),
      ).rejects.toMatchObject({ code: 'NOT_READY' });
      for (let run = 0; run < 2; run++) {
        await buildProgram()
          .exitOverride()
          .parseAsync(['node', 'idmint', 'kafka', 'init', '--pool-tags', tags.join(',')]);
      }
      await assertTopicsExist(topicAdmin(kafka), [REQUEST_TOPIC, ...tags.map((t) => poolTopic(t))]);
      const [meta] = (await admin.fetchTopicMetadata({ topics: [poolTopic(tags[0]!)] })).topics;
      expect(meta?.partitions).toHaveLength(16); // IDMINT_KAFKA_POOL_PARTITIONS by default
    } finally {
      await admin.disconnect();
    }
  });

  it('a responder refuses to start without its request topic and names the command', async () => {
    const responder = createResponder({
      signer: testSigner,
      kafka,
      dispenser: { get: () => Promise.reject(new Error('never called')) } satisfies IdDispenser,
      requestTopic: uniqueName('idmint.requests.absent'),
      groupId: uniqueName('idmint.responders.absent'),
    });
    await expect(responder.start()).rejects.toThrow(/topic "idmint\.requests\.absent-[0-9a-f]+" missing: run `idmint kafka init`/);
    await responder.close();
  });

  it("the pool sink deletes a tag's topics; another sink that measured it keeps working", async () => {
    const sink = new KafkaPoolSink({ signer: testSigner, kafka });
    const watcher = new KafkaPoolSink({ signer: testSigner, kafka: testKafka('watcher') });
    const admin = kafka.admin();
    await admin.connect();
    const other = uniqueName('init-c');
    tags.push(other);
    try {
      await sink.push({ bizTag: tags[1]!, shard: 0, start: 1, end: 10 });
      await sink.push({ bizTag: other, shard: 0, start: 1, end: 2000 });
      expect(await watcher.depth(tags[1]!, 0)).toBe(1000);
      await sink.deleteTopics(tags[1]!);
      await expect(assertTopicsExist(topicAdmin(kafka), [poolTopic(tags[1]!)])).rejects.toThrow(/missing/);
      expect(await sink.depth(tags[1]!, 0)).toBe(0);
      // The watcher's admin knew the deleted topic: it must still measure the others.
      expect(await watcher.depth(other, 0)).toBe(2000);
      await sink.push({ bizTag: other, shard: 0, start: 2001, end: 3000 });
      expect(await watcher.depth(other, 0)).toBe(3000);
    } finally {
      await sink.close();
      await watcher.close();
      await admin.disconnect();
    }
  });
});
