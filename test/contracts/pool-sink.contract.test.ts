import { Redis } from 'ioredis';
import type { Kafka } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BizTag, PoolSink, Segment } from '../../src/core/ports.js';
import { KafkaPoolConsumer } from '../../src/client/kafka/pool-consumer.js';
import { KafkaPoolSink } from '../../src/pool/kafka/sink.js';
import { RedisCounterPool } from '../../src/pool/redis/counter-pool.js';
import { RedisListPool } from '../../src/pool/redis/list-pool.js';
import { defineScripts } from '../../src/pool/redis/scripts.js';
import { testKafka } from '../support/kafka.js';
import { storeWithDispenser, type DispensingStore } from '../support/store.js';
import { uniqueName } from '../support/names.js';
import { expectNoDuplicates } from '../support/unique.js';
import { testTag } from '../support/tags.js';
import { TEST_VERIFY_KEY, testSigner } from '../support/signing.js';

// One contract for every PoolSink (where refills put segments), on the real servers: segments
// pushed concurrently come out exactly once — every ID of every segment, no ID twice, no other ID —
// and depth counts what is left; remove() empties the tag's pool.
interface Subject {
  sink: PoolSink;
  /** Takes up to n IDs the way the serving side does. */
  drain(tag: BizTag, n: number): Promise<string[]>;
  close(): Promise<void>;
}

let ts: DispensingStore;
let redis: Redis;
let kafka: Kafka;

const tag = (bizTag: string, pool: BizTag['pool']): BizTag => testTag(bizTag, { fallback: 'error', pool });

const subjects: Record<string, () => Subject> = {
  'redis-list': () => {
    const pool = new RedisListPool({ redis, keyPrefix: `${uniqueName('sink')}:` });
    return { sink: pool, drain: (t, n) => pool.take(t, n), close: async () => undefined };
  },
  'redis-counter': () => {
    const pool = new RedisCounterPool({ redis, keyPrefix: `${uniqueName('sink')}:` });
    return { sink: pool, drain: (t, n) => pool.take(t, n), close: async () => undefined };
  },
  kafka: () => {
    const sink = new KafkaPoolSink({ signer: testSigner, kafka, blockSize: 250 });
    const consumers = new Map<string, KafkaPoolConsumer>();
    return {
      sink,
      drain: async (t, n) => {
        let consumer = consumers.get(t.bizTag);
        if (!consumer) consumers.set(t.bizTag, (consumer = new KafkaPoolConsumer({ verifyKey: TEST_VERIFY_KEY, kafka, bizTag: t.bizTag })));
        return consumer.take(n, { timeoutMs: 15_000 });
      },
      close: async () => {
        for (const c of consumers.values()) await c.close();
        await sink.close();
      },
    };
  },
};

beforeAll(async () => {
  ts = await storeWithDispenser();
  redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  defineScripts(redis);
  kafka = testKafka('pool-sink-contract');
});

afterAll(async () => {
  await redis?.quit();
  await ts?.close();
});

describe.each(Object.keys(subjects))('PoolSink contract: %s', (name) => {
  let s: Subject;
  beforeAll(() => {
    s = subjects[name]!();
  });
  afterAll(async () => s?.close());

  it('segments pushed concurrently come out exactly once: every ID, none twice, no other', async () => {
    const bizTag = uniqueName(`sink-${name}`);
    await ts.store.createBiz({ bizTag, step: 1000, pool: name === 'kafka' ? 'kafka' : (name as BizTag['pool']) });
    const segments: Segment[] = await Promise.all(Array.from({ length: 8 }, () => ts.store.allocate(bizTag, 1000)));
    await Promise.all(segments.map((segment) => s.sink.push(segment)));
    expect(await s.sink.depth(bizTag, 0)).toBe(8000);
    const t = tag(bizTag, name === 'kafka' ? 'kafka' : (name as BizTag['pool']));
    const got: string[] = [];
    while (got.length < 8000) {
      const batch = await s.drain(t, 1 + Math.floor(Math.random() * 700));
      if (batch.length === 0) break;
      got.push(...batch);
    }
    const expected = segments.flatMap((seg) => Array.from({ length: seg.end - seg.start + 1 }, (_, i) => String(seg.start + i)));
    expectNoDuplicates(got);
    expect([...got].sort()).toEqual([...expected].sort());
    await s.sink.remove(bizTag);
  });
});
