import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/app/config.js';
import { startResponderRole } from '../../../src/app/roles/responder.js';
import { silentLogger } from '../../../src/core/logger.js';
import { createKafkaClient } from '../../../src/client/kafka/rpc-client.js';
import { deleteTopics, testKafka } from '../../support/kafka.js';
import { storeWithDispenser, type DispensingStore } from '../../support/store.js';
import { uniqueName } from '../../support/names.js';
import { TEST_VERIFY_KEY, testSigner } from '../../support/signing.js';

// A responder started on a cluster without its request topic creates it (idempotently), unless
// IDMINT_KAFKA_CREATE_TOPICS=false, where it refuses and names the command to run.
describe('Kafka topics at start', () => {
  const kafka = testKafka('topics-at-start');
  let ts: DispensingStore;
  const topics: string[] = [];

  beforeAll(async () => {
    ts = await storeWithDispenser();
    await ts.store.createBiz({ bizTag: 'order' });
  });

  afterAll(async () => {
    await deleteTopics(kafka, topics);
    await ts?.close();
  });

  const configFor = (requestTopic: string, create: string) =>
    loadConfig({
      KAFKA_BROKERS: process.env.KAFKA_BROKERS,
      IDMINT_KAFKA_REQUEST_TOPIC: requestTopic,
      IDMINT_KAFKA_RESPONDER_GROUP: uniqueName('topics-at-start'),
      IDMINT_KAFKA_CREATE_TOPICS: create,
      IDMINT_KAFKA_PARTITIONS: '2',
    });

  it('creates the missing request topic and serves; a second start finds it and creates nothing', async () => {
    const requestTopic = uniqueName('idmint-test.requests.created');
    topics.push(requestTopic);
    const config = configFor(requestTopic, 'true');
    const responder = await startResponderRole({ config, logger: silentLogger, dispenser: ts.dispenser, signer: testSigner });
    const client = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, requestTopic, clientId: 'topics-at-start' });
    try {
      await client.start();
      expect(await client.getIds('order', 3)).toHaveLength(3);
      const admin = kafka.admin();
      await admin.connect();
      const [meta] = (await admin.fetchTopicMetadata({ topics: [requestTopic] })).topics;
      await admin.disconnect();
      expect(meta?.partitions).toHaveLength(2);
      const again = await startResponderRole({ config: configFor(requestTopic, 'true'), logger: silentLogger, dispenser: ts.dispenser, signer: testSigner });
      await again.close();
    } finally {
      await client.close();
      await responder.close();
    }
  });

  it('with IDMINT_KAFKA_CREATE_TOPICS=false refuses a missing topic and names the command', async () => {
    const requestTopic = uniqueName('idmint-test.requests.missing');
    await expect(
      startResponderRole({ config: configFor(requestTopic, 'false'), logger: silentLogger, dispenser: ts.dispenser, signer: testSigner }),
    ).rejects.toThrow(/idmint kafka init/);
  });
});
