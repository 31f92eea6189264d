import { randomUUID } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';
import type { Consumer, Producer } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// Proves the wiring: the global setup named a Kafka broker that creates topics, joins groups
// and carries a message from a producer to a consumer.
describe('smoke: kafka', () => {
  const run = randomUUID();
  const topic = `idmint.smoke.${run}`;
  const kafka = new Kafka({
    clientId: `smoke-${run}`,
    brokers: process.env.KAFKA_BROKERS!.split(','),
    logLevel: logLevel.ERROR,
  });
  const admin = kafka.admin();
  const producer: Producer = kafka.producer();
  const consumer: Consumer = kafka.consumer({ groupId: `idmint.smoke.${run}` });

  beforeAll(async () => {
    await admin.connect();
    // auto.create.topics.enable=false: topics exist only when someone creates them.
    expect(await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true })).toBe(true);
    await producer.connect();
  });
  afterAll(async () => {
    await consumer.disconnect();
    await producer.disconnect();
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  });

  it('round-trips a message through a consumer group', async () => {
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    const joined = new Promise<void>((resolve) => consumer.on(consumer.events.GROUP_JOIN, () => resolve()));
    const received = new Promise<{ key: string; value: string }>((resolve) => {
      void consumer.run({
        eachMessage: async ({ message }) => {
          resolve({ key: message.key?.toString() ?? '', value: message.value?.toString() ?? '' });
        },
      });
    });
    await joined;

    const value = JSON.stringify({ v: 1, bizTag: 'smoke', start: '1', end: '1000' });
    await producer.send({ topic, messages: [{ key: run, value }] });

    expect(await received).toEqual({ key: run, value });
  });

  it('refuses to auto-create a topic nobody created', async () => {
    const topics = await admin.listTopics();
    expect(topics).toContain(topic);
    expect(topics).not.toContain(`idmint.smoke.absent.${run}`);
    // A metadata request asks the broker to auto-create; with no retries it must fail fast.
    const strict = new Kafka({ brokers: process.env.KAFKA_BROKERS!.split(','), logLevel: logLevel.NOTHING, retry: { retries: 0 } });
    const probe = strict.admin();
    await probe.connect();
    try {
      await expect(probe.fetchTopicMetadata({ topics: [`idmint.smoke.absent.${run}`] })).rejects.toThrow(/does not host this topic-partition|unknown topic/i);
    } finally {
      await probe.disconnect();
    }
    expect(await admin.listTopics()).not.toContain(`idmint.smoke.absent.${run}`);
  });
});
