import type { Kafka } from 'kafkajs';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdmintClient } from '../../../src/client/client.js';
import { kafkaPoolTransport } from '../../../src/client/kafka/transports.js';
import { KafkaPoolConsumer } from '../../../src/client/kafka/pool-consumer.js';
import { KafkaPoolSink } from '../../../src/pool/kafka/sink.js';
import { KafkaPoolWatch } from '../../../src/pool/kafka/watch.js';
import { RedisPoolMeta } from '../../../src/pool/redis/meta.js';
import { createRefillProcessor, type RefillProcessor } from '../../../src/refill/processor.js';
import { kafkaPoolTags, testKafka } from '../../support/kafka.js';
import { storeWithDispenser, type DispensingStore } from '../../support/store.js';
import { uniqueName } from '../../support/names.js';
import { env } from '../../support/env.js';
import { expectNoDuplicates } from '../../support/unique.js';
import { sleep, until, untilValue } from '../../support/poll.js';
import { inlineRefillTrigger } from '../../support/refill-trigger.js';
import { TEST_VERIFY_KEY, testSigner } from '../../support/signing.js';

// Kafka pool topics at rates: the refill's watch measures demand from committed offsets and asks
// for threshold refills; blocks spread over 16 partitions; each SDK instance (its own Kafka client
// and consumer, as a pod would have) takes blocks into its tag buffer. Blocks are signed.
describe('Kafka pool topics: demand-driven refills, every consumer fed', () => {
  let kafka: Kafka;
  let ts: DispensingStore;
  let sink: KafkaPoolSink;
  let redis: Redis;
  let meta: RedisPoolMeta;
  let processor: RefillProcessor;
  const tags = kafkaPoolTags(() => ts.store);
  const newTag = tags.create;
  const inline = inlineRefillTrigger((bizTag, shard, reason) => processor.refill(bizTag, shard, reason));
  const trigger = inline.trigger;

  beforeAll(async () => {
    kafka = testKafka();
    ts = await storeWithDispenser();
    sink = new KafkaPoolSink({ signer: testSigner, kafka, partitions: 16 });
    redis = new Redis(env('REDIS_URL'));
    meta = new RedisPoolMeta({ redis, keyPrefix: `${uniqueName('kps')}:` });
    processor = createRefillProcessor({ store: ts.store, sinks: { kafka: sink }, meta, poolSeconds: 10, minDepth: 20_000, maxRangeDepth: 5_000_000 });
  });

  afterAll(async () => {
    await inline.idle();
    for (const tag of tags.made) await sink.deleteTopics(tag).catch(() => undefined);
    await sink.close();
    redis.disconnect();
    await ts?.close();
  });

  it.each([1, 4, 16])(
    '%i SDK instances for up to 4 s: every instance served, zero duplicates, refills asked by the watch',
    async (instances) => {
      const bizTag = await newTag(`scale${instances}`);
      const watch = new KafkaPoolWatch({ sink, store: ts.store, meta, trigger, autoKind: 'redis-counter', everyMs: 200, tagsEveryMs: 200, minDepth: 20_000 });
      await processor.refill(bizTag, 0, 'manual');
      watch.start();
      const clients = Array.from({ length: instances }, (_, i) => {
        const own = testKafka(`scale-${i}`);
        return new IdmintClient({
          transport: kafkaPoolTransport({ verifyKey: TEST_VERIFY_KEY, kafka: own, takeTimeoutMs: 2000 }),
          maxBatchSize: 100_000,
          timeoutMs: 20_000,
        });
      });
      try {
        const got: number[][] = clients.map(() => []);
        let empty = 0;
        // Each starts (joins the group) before any of them measures, so all own partitions. A join
        // rebalances the others: on a loaded machine a first take can outlast its 2 s take timeout
        // while partitions move (POOL_EMPTY, as the loop below allows), so it is asked again.
        await Promise.all(
          clients.map((c) =>
            untilValue(
              'a first ID for every instance',
              () =>
                c.nextMany(bizTag, 1).then(
                  () => true,
                  (err: { code?: string }) => {
                    if (err.code !== 'POOL_EMPTY') throw err;
                    empty++;
                    return false;
                  },
                ),
              (ok) => ok,
            ),
          ),
        );
        const deadline = Date.now() + 4000;
        await Promise.all(
          clients.map(async (c, i) => {
            // Up to 2 M IDs in all (every one kept and checked), or 4 s: enough to feed every instance
            // through refills, without loading the machine the other integration file shares.
            while (Date.now() < deadline && got[i]!.length < 2_000_000 / instances) {
              try {
                for (const id of await c.nextMany(bizTag, 2000)) got[i]!.push(Number(id));
              } catch (err) {
                // A partition run dry for the take timeout before its refill arrived: asked again.
                if ((err as { code?: string }).code !== 'POOL_EMPTY') throw err;
                empty++;
              }
            }
          }),
        );
        const all = got.flat();
        for (const [i, ids] of got.entries()) expect(ids.length, `instance ${i} of ${instances}`).toBeGreaterThan(0);
        expectNoDuplicates(Float64Array.from(all));
        console.log(`${instances} instance(s): ${all.length} IDs, per instance min ${Math.min(...got.map((g) => g.length))}, ${empty} POOL_EMPTY`);
        // The watch saw the consumption and asked for threshold refills (not only the first, manual one).
        expect(inline.asked.filter((r) => r.bizTag === bizTag && r.reason === 'threshold').length).toBeGreaterThan(0);
      } finally {
        await watch.close();
        await Promise.all(clients.map((c) => c.close()));
      }
    },
    120_000,
  );

  it('records consumption as demand and asks for a threshold refill within a tick of the pool running low', async () => {
    const bizTag = await newTag('watch');
    const watch = new KafkaPoolWatch({
      sink,
      store: ts.store,
      meta,
      trigger: { requestRefill: async () => undefined },
      autoKind: 'redis-counter',
      everyMs: 100,
      tagsEveryMs: 100,
      minDepth: 20_000,
    });
    await processor.refill(bizTag, 0, 'manual');
    // Other tests' tags are in the store too: only this tag's refills are looked at.
    const mine = (asked: Array<{ bizTag: string }>) => asked.filter((a) => a.bizTag === bizTag);
    expect(mine(await watch.tick())).toEqual([]); // full, and the first reading only sets the baseline
    const consumer = new KafkaPoolConsumer({ verifyKey: TEST_VERIFY_KEY, kafka, bizTag, bufferBlocks: 64 });
    try {
      const depth = await sink.depth(bizTag, 0);
      const blocks = await consumer.takeBlocks(depth, { timeoutMs: 20_000 });
      let taken = blocks.reduce((n, b) => n + b.end - b.start + 1, 0);
      while (taken < depth) taken += (await consumer.takeBlocks(depth - taken, { timeoutMs: 20_000 })).reduce((n, b) => n + b.end - b.start + 1, 0);
      // The first tick's lease (everyMs - 50 = 50 ms) may not have run out yet when the consumer is quick.
      await sleep(100);
      expect(mine(await watch.tick())).toEqual([expect.objectContaining({ bizTag, shard: 0, depth: 0 })]);
      expect(await meta.rate(bizTag, 0)).toBeGreaterThan(0);
      // Drained: the burst the next refill sizes for is SUPPLY_LIMITED_FACTOR times what the reading saw.
      expect(await meta.burstRate(bizTag, 0)).toBeGreaterThan(await meta.rate(bizTag, 0));
    } finally {
      await consumer.close();
      await watch.close();
    }
  }, 60_000);

  it('without a fallback, an instance that owns no partition waits for a rebalance that gives it one, and is served', async () => {
    const bizTag = await newTag('waits');
    const narrow = new KafkaPoolSink({ signer: testSigner, kafka, partitions: 1 });
    const consumers = [0, 1].map(() => new KafkaPoolConsumer({ verifyKey: TEST_VERIFY_KEY, kafka, bizTag, bufferBlocks: 1 }));
    try {
      for (let i = 0; i < 5; i++) await narrow.push(await ts.store.allocate(bizTag, 1000));
      await Promise.all(consumers.map((c) => c.start()));
      await until('one of the two owns the one partition', () => consumers.filter((c) => c.hasPartitions).length === 1);
      const idle = consumers.find((c) => !c.hasPartitions)!;
      const owner = consumers.find((c) => c.hasPartitions)!;
      // Whatever it committed while it owned the partition first, then a wait for the partition.
      while (idle.buffered > 0) await idle.takeBlocks(1000);
      const waiting = idle.takeBlocks(10, { timeoutMs: 60_000, waitForPartition: true });
      await owner.close();
      const got = await waiting;
      expect(got.reduce((n, b) => n + b.end - b.start + 1, 0)).toBe(10);
      expect(idle.hasPartitions).toBe(true);
    } finally {
      await Promise.all(consumers.map((c) => c.close()));
      await narrow.close();
    }
  }, 90_000);

  it('an instance beyond the partition count owns none and answers at once; the transport then serves from its fallback', async () => {
    const bizTag = await newTag('beyond');
    const narrow = new KafkaPoolSink({ signer: testSigner, kafka, partitions: 1 });
    const consumers = [0, 1].map(() => new KafkaPoolConsumer({ verifyKey: TEST_VERIFY_KEY, kafka, bizTag, bufferBlocks: 1 }));
    try {
      for (let i = 0; i < 5; i++) await narrow.push(await ts.store.allocate(bizTag, 1000));
      await consumers[0]!.start();
      await consumers[1]!.start();
      await until('one of the two owns the one partition', () => consumers.filter((c) => c.hasPartitions).length === 1);
      const idle = consumers.find((c) => !c.hasPartitions)!;
      const owner = consumers.find((c) => c.hasPartitions)!;
      // What it committed while it owned the partition stays its own; then it answers with nothing, at once.
      let got;
      do got = await idle.takeBlocks(1000, { timeoutMs: 60_000 });
      while (got.length > 0);
      expect(idle.buffered).toBe(0);
      expect(await owner.take(10, { timeoutMs: 20_000 })).toHaveLength(10);
    } finally {
      await Promise.all(consumers.map((c) => c.close()));
      await narrow.close();
    }

    // A transport whose consumer gets nothing (a dry topic here) asks its fallback for the same tag.
    const dry = await newTag('dry');
    await sink.push(await ts.store.allocate(dry, 10));
    const consumer = new KafkaPoolConsumer({ verifyKey: TEST_VERIFY_KEY, kafka, bizTag: dry });
    await consumer.take(10, { timeoutMs: 20_000 });
    await consumer.close();
    const fallback = {
      fetch: async (_t: string, n: number) => ({ ids: Array.from({ length: n }, (_, i) => String(90_000_000 + i)), source: 'segment' as const }),
      close: async () => undefined,
    };
    const transport = kafkaPoolTransport({ verifyKey: TEST_VERIFY_KEY, kafka: testKafka('dry'), fallback, takeTimeoutMs: 300 });
    try {
      expect(await transport.fetch(dry, 5)).toMatchObject({ source: 'segment', ids: ['90000000', '90000001', '90000002', '90000003', '90000004'] });
    } finally {
      await transport.close();
    }
  }, 90_000);
});
