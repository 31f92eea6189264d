import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdmintClient } from '../../../src/client/client.js';
import { kafkaPoolTransport } from '../../../src/client/kafka/transports.js';
import { isIdmintError } from '../../../src/core/errors.js';
import { testKafka } from '../../support/kafka.js';
import { KafkaPoolSink } from '../../../src/pool/kafka/sink.js';
import { KafkaPoolWatch } from '../../../src/pool/kafka/watch.js';
import { RedisPoolMeta } from '../../../src/pool/redis/meta.js';
import { createRefillProcessor, type RefillProcessor } from '../../../src/refill/processor.js';
import { env } from '../../support/env.js';
import { uniqueName } from '../../support/names.js';
import { until, untilValue } from '../../support/poll.js';
import { inlineRefillTrigger, type InlineRefillTrigger } from '../../support/refill-trigger.js';
import { startPrivateServer, type PrivateServer } from '../../support/servers.js';
import { storeWithDispenser, type DispensingStore } from '../../support/store.js';
import { expectNoDuplicates } from '../../support/unique.js';
import { TEST_VERIFY_KEY, testSigner } from '../../support/signing.js';

/**
 * Kafka pool topics through faults, on a private Kafka: instances joining and leaving while others
 * hold committed blocks (rebalances), and the broker SIGKILLed and restarted under load. Every ID
 * any instance handed out is collected: zero duplicates, and the pool serves again afterwards.
 */
describe('Kafka pool topics under rebalances and a Kafka restart', () => {
  let kafkaServer: PrivateServer;
  let ts: DispensingStore;
  let sink: KafkaPoolSink;
  let redis: Redis;
  let processor: RefillProcessor;
  let watch: KafkaPoolWatch;
  let inline: InlineRefillTrigger | undefined;

  beforeAll(async () => {
    kafkaServer = await startPrivateServer('kafka');
    ts = await storeWithDispenser();
    sink = new KafkaPoolSink({ signer: testSigner, kafka: testKafka('faults-refill', kafkaServer.url) });
    redis = new Redis(env('REDIS_URL'));
    const meta = new RedisPoolMeta({ redis, keyPrefix: `${uniqueName('kpf')}:` });
    processor = createRefillProcessor({ store: ts.store, sinks: { kafka: sink }, meta, minDepth: 20_000, maxRangeDepth: 5_000_000 });
    // One refill per tag at a time, as the BullMQ queue deduplicates; a failed one (Kafka down) is asked again by the next reading.
    inline = inlineRefillTrigger((bizTag, shard, reason) => processor.refill(bizTag, shard, reason));
    const trigger = inline.trigger;
    watch = new KafkaPoolWatch({ sink, store: ts.store, meta, trigger, autoKind: 'redis-counter', everyMs: 250, tagsEveryMs: 250, minDepth: 20_000 });
    watch.start();
  }, 120_000);

  afterAll(async () => {
    await watch?.close();
    await inline?.idle();
    await sink?.close().catch(() => undefined);
    redis?.disconnect();
    await ts?.close();
    await kafkaServer?.close();
  }, 60_000);

  function instance(i: number): IdmintClient {
    const kafka = testKafka(`faults-${i}`, kafkaServer.url);
    return new IdmintClient({
      transport: kafkaPoolTransport({ verifyKey: TEST_VERIFY_KEY, kafka, takeTimeoutMs: 500, sessionTimeoutMs: 6000 }),
      maxBatchSize: 50_000,
      timeoutMs: 20_000,
    });
  }

  /** Takes 500 IDs every 10 ms (about 50,000/s, so every ID can be kept) until stopped; a dry or unreachable pool is asked again. */
  function load(client: IdmintClient, bizTag: string, into: number[]): { stop(): Promise<void> } {
    let stopped = false;
    const loop = (async () => {
      while (!stopped) {
        try {
          for (const id of await client.nextMany(bizTag, 500)) into.push(Number(id));
        } catch (err) {
          if (!isIdmintError(err)) throw err;
        }
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    return {
      stop: async () => {
        stopped = true;
        await loop;
      },
    };
  }

  it('instances joining and leaving while the others hold committed blocks: zero duplicates', async () => {
    const bizTag = uniqueName('rebalance');
    await ts.store.createBiz({ bizTag, pool: 'kafka', step: 1000 });
    await processor.refill(bizTag, 0, 'manual');
    const got: number[][] = [];
    const clients: IdmintClient[] = [];
    const loads: Array<{ stop(): Promise<void> }> = [];
    const add = (): void => {
      const ids: number[] = [];
      got.push(ids);
      const c = instance(clients.length);
      clients.push(c);
      loads.push(load(c, bizTag, ids));
    };
    try {
      add();
      add();
      await until('both instances serving', () => got.every((g) => g.length > 0), { timeoutMs: 60_000 });
      add();
      add();
      await until('four instances serving', () => got.every((g) => g.length > 0), { timeoutMs: 60_000 });
      // The first leaves (its buffered blocks are dropped: gaps), a fifth joins: two more rebalances.
      await loads[0]!.stop();
      await clients[0]!.close();
      add();
      const at = got.slice(1).map((g) => g.length);
      await until('the four left serving after the rebalance', () => got.slice(1).every((g, i) => g.length > (at[i] ?? 0)), { timeoutMs: 60_000 });
    } finally {
      await Promise.all(loads.map((l) => l.stop()));
      await Promise.all(clients.map((c) => c.close()));
    }
    expectNoDuplicates(Float64Array.from(got.flat()));
    console.log(`rebalances: ${got.flat().length} IDs from ${got.length} instances (${got.map((g) => g.length).join(', ')}), 0 duplicates`);
  }, 180_000);

  it('Kafka SIGKILLed under load and restarted: the instances serve again, zero duplicates', async () => {
    const bizTag = uniqueName('restart');
    await ts.store.createBiz({ bizTag, pool: 'kafka', step: 1000 });
    await processor.refill(bizTag, 0, 'manual');
    const got: number[][] = [[], [], [], []];
    const clients = got.map((_, i) => instance(10 + i));
    const loads = clients.map((c, i) => load(c, bizTag, got[i]!));
    try {
      await until('four instances serving', () => got.every((g) => g.length > 0), { timeoutMs: 60_000 });
      const committedBefore = (await sink.state(bizTag, 0))!.committed;
      const killedAt = Date.now();
      await kafkaServer.kill();
      await new Promise((r) => setTimeout(r, 2000));
      await kafkaServer.start();
      // The instances' buffers carry them through the outage; the pool serves again once they
      // commit new blocks on the restarted broker (refilled by the watch meanwhile).
      await until('blocks committed on the restarted broker', async () => ((await sink.state(bizTag, 0).catch(() => null))?.committed ?? 0) > committedBefore, {
        timeoutMs: 120_000,
        intervalMs: 500,
      });
      const at = got.flat().length;
      await until('IDs flowing after the restart', () => got.flat().length > at + 10_000, { timeoutMs: 60_000 });
      console.log(`Kafka restart: blocks committed again ${Date.now() - killedAt} ms after the kill`);
    } finally {
      await Promise.all(loads.map((l) => l.stop()));
      await Promise.all(clients.map((c) => c.close()));
    }
    expectNoDuplicates(Float64Array.from(got.flat()));
    console.log(`Kafka restart: ${got.flat().length} IDs from 4 instances, 0 duplicates`);
  }, 240_000);

  it("Kafka down at an instance's first take: it answers an error, and serves once Kafka is back", async () => {
    const bizTag = uniqueName('firsttake');
    await ts.store.createBiz({ bizTag, pool: 'kafka', step: 1000 });
    await processor.refill(bizTag, 0, 'manual');
    await kafkaServer.kill();
    const client = instance(20);
    try {
      // The consumer's start fails (no broker). Before, the transport kept that failed consumer and
      // answered NOT_READY for the life of the process.
      const error = await client.nextMany(bizTag, 10).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(isIdmintError(error), String(error)).toBe(true);
      await kafkaServer.start();
      const ids = await untilValue(
        'the instance serving after Kafka is back',
        () => client.nextMany(bizTag, 100).catch(() => [] as bigint[]),
        (got) => got.length === 100,
        { timeoutMs: 120_000, intervalMs: 500 },
      );
      expectNoDuplicates(ids);
    } finally {
      await client.close();
    }
  }, 240_000);
});
