import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdmintClient } from '../../src/client/client.js';
import { kafkaPoolTransport } from '../../src/client/kafka/transports.js';
import { isIdmintError } from '../../src/core/errors.js';
import { poolGroup, poolTopic } from '../../src/kafka/names.js';
import { KafkaPoolSink } from '../../src/pool/kafka/sink.js';
import { KafkaPoolWatch } from '../../src/pool/kafka/watch.js';
import { RedisPoolMeta } from '../../src/pool/redis/meta.js';
import { createRefillProcessor, type RefillProcessor } from '../../src/refill/processor.js';
import { env } from '../support/env.js';
import { startKafkaCluster, type KafkaCluster } from '../support/kafka-cluster.js';
import { testKafka } from '../support/kafka.js';
import { uniqueName } from '../support/names.js';
import { sleep, until } from '../support/poll.js';
import { inlineRefillTrigger, type InlineRefillTrigger } from '../support/refill-trigger.js';
import { storeWithDispenser, type DispensingStore } from '../support/store.js';
import { expectNoDuplicates } from '../support/unique.js';
import { TEST_VERIFY_KEY, testSigner } from '../support/signing.js';

/** The __consumer_offsets partition that holds a group's offsets (Kafka: abs(groupId.hashCode()) % partitions; the test cluster has 4). */
function offsetsPartition(groupId: string, partitions = 4): number {
  let h = 0;
  for (let i = 0; i < groupId.length; i++) h = (Math.imul(31, h) + groupId.charCodeAt(i)) | 0;
  return (h === -2147483648 ? 0 : Math.abs(h)) % partitions;
}

/**
 * Kafka pool topics on three brokers (topics and the group's offsets replicated three ways,
 * min.insync.replicas 2, acks=-1), refilled by the real refill processor and pool watch, read by
 * three SDK instances under load: the group coordinator's broker SIGKILLed (the offsets committed
 * before hand-out move to another broker), the leader of a pool partition SIGKILLed, and a broker
 * SIGSTOPped for 15 s. Every ID any instance handed out is collected: zero duplicates, and the
 * pool serves again after each fault.
 */
describe('Kafka pool topics on three brokers, a broker lost under load', () => {
  let cluster: KafkaCluster;
  let ts: DispensingStore;
  let sink: KafkaPoolSink;
  let redis: Redis;
  let processor: RefillProcessor;
  let watch: KafkaPoolWatch;
  let inline: InlineRefillTrigger | undefined;

  beforeAll(async () => {
    cluster = await startKafkaCluster(3);
    ts = await storeWithDispenser();
    sink = new KafkaPoolSink({
      signer: testSigner,
      kafka: testKafka('prepl-refill', cluster.brokers),
      partitions: 6,
    });
    redis = new Redis(env('REDIS_URL'));
    const meta = new RedisPoolMeta({ redis, keyPrefix: `${uniqueName('kpr')}:` });
    processor = createRefillProcessor({ store: ts.store, sinks: { kafka: sink }, meta, minDepth: 20_000, maxRangeDepth: 5_000_000 });
    inline = inlineRefillTrigger((bizTag, shard, reason) => processor.refill(bizTag, shard, reason));
    watch = new KafkaPoolWatch({
      sink,
      store: ts.store,
      meta,
      trigger: inline.trigger,
      autoKind: 'redis-counter',
      everyMs: 250,
      tagsEveryMs: 250,
      minDepth: 20_000,
    });
    watch.start();
  }, 300_000);

  afterAll(async () => {
    await watch?.close();
    await inline?.idle();
    await sink?.close().catch(() => undefined);
    redis?.disconnect();
    await ts?.close();
    await cluster?.close();
  }, 120_000);

  it('serves through the coordinator and a partition leader SIGKILLed and a broker hung for 15 s: 0 duplicates', async () => {
    const bizTag = uniqueName('prepl');
    await ts.store.createBiz({ bizTag, pool: 'kafka', step: 1000 });
    await processor.refill(bizTag, 0, 'manual');
    const got: number[][] = [[], [], []];
    const taken: number[] = [];
    const errors = new Map<string, number>();
    const clients = got.map((_, i) => {
      const kafka = testKafka(`prepl-${i}`, cluster.brokers);
      return new IdmintClient({
        transport: kafkaPoolTransport({ verifyKey: TEST_VERIFY_KEY, kafka, takeTimeoutMs: 500, sessionTimeoutMs: 6000 }),
        maxBatchSize: 50_000,
        timeoutMs: 20_000,
      });
    });
    let running = true;
    const loads = clients.map(async (client, i) => {
      while (running) {
        try {
          for (const id of await client.nextMany(bizTag, 500)) got[i]!.push(Number(id));
          taken.push(Date.now());
        } catch (err) {
          if (!isIdmintError(err)) throw err;
          errors.set(err.code, (errors.get(err.code) ?? 0) + 1);
        }
        await sleep(10);
      }
    });
    // The topic as the refill sees it, read every 2 s: on a stall it says whether the topic ran dry
    // (the refill stopped) or its blocks sat unread (the consumers stopped).
    let topicState = 'not read yet';
    const readState = async (): Promise<void> => {
      while (running) {
        const state = await sink.state(bizTag, 0).catch((err: unknown) => `unreadable: ${(err as Error).message}`);
        topicState =
          typeof state === 'string' || state === null
            ? String(state)
            : `unconsumed blocks per partition ${state.unconsumed.join('/')}, committed ${state.committed}`;
        await sleep(2000);
      }
    };
    const total = (): number => got.reduce((n, g) => n + g.length, 0);
    const detail = (): string =>
      `${total()} IDs (${got.map((g) => g.length).join(', ')}); retried errors ${JSON.stringify(Object.fromEntries(errors))}; topic at ${new Date().toISOString()}: ${topicState}`;
    /** The longest stretch without any instance taking IDs, from `from` until serving has gone on 5 s. */
    const longestGap = (from: number, to: number): number => {
      const times = [from, ...taken.filter((t) => t > from && t < to), to];
      return Math.max(...times.slice(1).map((t, i) => t - times[i]!));
    };
    const servingAgain = async (what: string, from: number): Promise<number> => {
      const mark = total();
      await until(`the instances serving again ${what}`, () => total() > mark + 200_000, { timeoutMs: 120_000, detail });
      return longestGap(from, Date.now());
    };
    const report: string[] = [];
    const reading = readState();
    try {
      await until('three instances serving', () => got.every((g) => g.length > 10_000), { timeoutMs: 120_000, detail });

      // 1. The group coordinator's broker: the offsets committed before hand-out are on the
      //    __consumer_offsets partition it led, replicated to the other two.
      const coordinator = await cluster.leaderOf('__consumer_offsets', offsetsPartition(poolGroup(bizTag, 0)));
      let at = Date.now();
      await cluster.kill(coordinator);
      report.push(`coordinator ${coordinator} killed: longest stretch without IDs ${await servingAgain('after the coordinator was killed', at)} ms`);
      await cluster.start(coordinator);
      await cluster.untilInSync();

      // 2. The leader of a pool partition.
      const leader = await cluster.leaderOf(poolTopic(bizTag, 0), 0);
      at = Date.now();
      await cluster.kill(leader);
      report.push(`partition 0 leader ${leader} killed: longest stretch without IDs ${await servingAgain('after the partition leader was killed', at)} ms`);
      await cluster.start(leader);
      await cluster.untilInSync();

      // 3. A broker hung for 15 s (its sockets open, nothing answering), then resumed.
      const hung = await cluster.leaderOf(poolTopic(bizTag, 0), 1);
      at = Date.now();
      const before = total();
      cluster.pause(hung);
      await sleep(15_000);
      const during = total() - before;
      cluster.resume(hung);
      report.push(
        `broker ${hung} hung 15 s: ${during} IDs meanwhile; longest stretch without IDs ${await servingAgain('after the hung broker resumed', at)} ms`,
      );
    } finally {
      running = false;
      await Promise.all([...loads, reading]);
      await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
      await sink.deleteTopics(bizTag).catch(() => undefined);
    }
    console.info(`kafka pool on three brokers: ${detail()}; ${report.join('; ')}`);
    expectNoDuplicates(Float64Array.from(got.flat()), 'Kafka pool IDs through broker failures');
    expect(got.every((g) => g.length > 0)).toBe(true);
  }, 900_000);
});
