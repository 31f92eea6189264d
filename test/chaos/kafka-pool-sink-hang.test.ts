import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodePoolBlock } from '../../src/kafka/messages.js';
import { poolTopic } from '../../src/kafka/names.js';
import { KafkaPoolSink } from '../../src/pool/kafka/sink.js';
import { startKafkaCluster, type KafkaCluster } from '../support/kafka-cluster.js';
import { testKafka } from '../support/kafka.js';
import { uniqueName } from '../support/names.js';
import { sleep } from '../support/poll.js';
import { overlapsOf, type Range } from '../support/unique.js';
import { testSigner } from '../support/signing.js';

/** Every block in the topic, read from the beginning to its end offsets by a group of its own. */
async function readTopic(brokers: string, topic: string): Promise<Range[]> {
  const kafka = testKafka(uniqueName('read'), brokers);
  const admin = kafka.admin();
  await admin.connect();
  const ends = new Map((await admin.fetchTopicOffsets(topic)).map((p) => [p.partition, Number(p.high)]));
  await admin.disconnect();
  const consumer = kafka.consumer({ groupId: uniqueName('read') });
  const blocks: Range[] = [];
  const at = new Map<number, number>();
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let done!: () => void;
  const all = new Promise<void>((resolve) => (done = resolve));
  const finished = (): boolean => [...ends].every(([p, high]) => (at.get(p) ?? 0) >= high);
  if (finished()) done();
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      const block = decodePoolBlock(message.value);
      if (block) blocks.push({ start: Number(block.start), end: Number(block.end) });
      at.set(partition, Number(message.offset) + 1);
      if (finished()) done();
    },
  });
  await all;
  await consumer.disconnect();
  return blocks;
}

/**
 * The refill's pushes into a pool topic while a broker of its partitions hangs: several pushes
 * at once on one sink (a refill worker runs jobs concurrently), each a fresh segment. A send that
 * timed out on a broker waiting for its hung follower can still be appended a moment later; the
 * topic must then hold each block at most once — two copies would be handed to two consumers.
 */
describe('Kafka pool sink: concurrent pushes through a hung broker', () => {
  let cluster: KafkaCluster;
  beforeAll(async () => {
    // The HA profile's timings (scripts/infra-ha.sh): a produce waits for a hung follower longer than a request's timeout.
    cluster = await startKafkaCluster(3, { brokerSessionTimeoutMs: 6000, replicaLagTimeMaxMs: 8000 });
  }, 300_000);
  afterAll(async () => {
    await cluster?.close();
  }, 120_000);

  it('never appends a block twice while a follower, then the leader, hangs for 10 s', async () => {
    const bizTag = uniqueName('sinkhang');
    const topic = poolTopic(bizTag, 0);
    const sink = new KafkaPoolSink({
      signer: testSigner,
      kafka: testKafka('sinkhang', cluster.brokers),
      partitions: 2,
      blockSize: 10,
    });
    let next = 1;
    let running = true;
    let pushed = 0;
    let failed = 0;
    // Eight pushers at once, each a fresh segment of 40 IDs: about two blocks per partition.
    const pushers = Array.from({ length: 8 }, async () => {
      while (running) {
        const start = next;
        next += 40;
        try {
          await sink.push({ bizTag, shard: 0, start, end: start + 39 });
          pushed++;
        } catch {
          failed++;
          await sleep(50);
        }
      }
    });
    try {
      await sleep(3000);
      for (let round = 0; round < 2; round++) {
        const leader = await cluster.leaderOf(topic, round % 2);
        const follower = cluster.nodeIds.find((n) => n !== leader)!;
        cluster.pause(follower);
        await sleep(10_000);
        cluster.resume(follower);
        await cluster.untilInSync();
        await sleep(3000);
      }
      const leaderNow = await cluster.leaderOf(topic, 0);
      cluster.pause(leaderNow);
      await sleep(10_000);
      cluster.resume(leaderNow);
      await cluster.untilInSync();
      await sleep(3000);
    } finally {
      running = false;
      await Promise.all(pushers);
    }
    const blocks = await readTopic(cluster.brokers, topic);
    await sink.close();
    const overlaps = overlapsOf(blocks);
    console.info(
      `pool sink through hung brokers: ${pushed} pushes acknowledged, ${failed} failed, ${blocks.length} blocks in the topic, ${overlaps.length} overlapping`,
    );
    expect(overlaps.map(([a, b]) => `[${a.start}, ${a.end}] / [${b.start}, ${b.end}]`).slice(0, 10)).toEqual([]);
    expect(pushed).toBeGreaterThan(0);
  }, 600_000);
});
