import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Kafka } from 'kafkajs';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { KafkaPoolSink } from '../../../src/pool/kafka/sink.js';
import { KAFKA_POOL_CONSUMER_DEFAULTS, KafkaPoolConsumer } from '../../../src/client/kafka/pool-consumer.js';
import { RedisPoolMeta } from '../../../src/pool/redis/meta.js';
import { createRefillProcessor } from '../../../src/refill/processor.js';
import { kafkaPoolTags, testKafka } from '../../support/kafka.js';
import { storeWithDispenser, type DispensingStore } from '../../support/store.js';
import { uniqueName } from '../../support/names.js';
import { env } from '../../support/env.js';
import { expectNoDuplicates } from '../../support/unique.js';
import { until } from '../../support/poll.js';
import { TEST_VERIFY_KEY, testSigner } from '../../support/signing.js';

const fixture = fileURLToPath(new URL('./fixtures/pool-consumer.ts', import.meta.url));
const root = fileURLToPath(new URL('../../../', import.meta.url));

// Kafka pool topics: blocks published by the sink, taken by one group per tag, commit before hand-out.
describe('Kafka pool topics', () => {
  let kafka: Kafka;
  let ts: DispensingStore;
  let sink: KafkaPoolSink;
  const registry = new Registry();
  const tags = kafkaPoolTags(() => ts.store);
  const newTag = tags.create;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    kafka = testKafka();
    ts = await storeWithDispenser();
    sink = new KafkaPoolSink({ signer: testSigner, kafka, blockSize: 100, registry });
  });

  afterAll(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    for (const tag of tags.made) await sink.deleteTopics(tag).catch(() => undefined);
    await sink.close();
    await ts?.close();
  });

  it("publishes a segment as blocks and measures depth from the pool group's committed offsets", async () => {
    const bizTag = await newTag('depth');
    expect(await sink.depth(bizTag, 0)).toBe(0);
    await sink.push(await ts.store.allocate(bizTag, 1000));
    expect(await sink.depth(bizTag, 0)).toBe(1000);

    const consumer = new KafkaPoolConsumer({ verifyKey: TEST_VERIFY_KEY, kafka, bizTag, bufferBlocks: 1 });
    try {
      const ids = await consumer.take(250, { timeoutMs: 10_000 });
      expect(ids).toHaveLength(250);
      expectNoDuplicates(ids);
      expect(ids.length).toBe(250);
      // Three blocks are committed (the third is in hand): depth counts what no one can receive again.
      expect(await sink.depth(bizTag, 0)).toBe(700);
    } finally {
      await consumer.close();
    }
    expect(await registry.getSingleMetricAsString('idmint_kafka_pool_depth_ids')).toContain(`biz_tag="${bizTag}"} 700`);
  });

  it('concurrent takers in one process never share an ID', async () => {
    const bizTag = await newTag('concurrent');
    for (let i = 0; i < 5; i++) await sink.push(await ts.store.allocate(bizTag, 1000));
    const consumer = new KafkaPoolConsumer({ verifyKey: TEST_VERIFY_KEY, kafka, bizTag, bufferBlocks: 3 });
    try {
      const batches = await Promise.all(Array.from({ length: 40 }, () => consumer.take(123, { timeoutMs: 20_000 })));
      const all = batches.flat();
      expect(all).toHaveLength(40 * 123);
      expectNoDuplicates(all);
    } finally {
      await consumer.close();
    }
  });

  // Issue 40: 4 SDK instances in one process looping on `await next()` held the event loop while
  // their buffers lasted; a waiting take's timer then fired late, before the poll phase delivered
  // the block committed meanwhile, and the take said POOL_EMPTY for a topic that was not dry.
  it('a take whose wait the event loop could not serve (a late timer) waits that time back: the block committed meanwhile is served', async () => {
    const bizTag = await newTag('late');
    await sink.push(await ts.store.allocate(bizTag, 1000));
    const consumer = new KafkaPoolConsumer({ verifyKey: TEST_VERIFY_KEY, kafka, bizTag, bufferBlocks: 1 });
    try {
      // One block committed and buffered; the others fetched, waiting for room.
      await consumer.takeBlocks(1, { timeoutMs: 20_000 });
      await until('a block buffered', async () => consumer.buffered > 0, { timeoutMs: 20_000 });
      await new Promise((resolve) => setTimeout(resolve, 500));
      // Taking the buffered block makes room: the next block's commit starts now...
      expect(await consumer.takeBlocks(consumer.buffered, { timeoutMs: 0 })).not.toHaveLength(0);
      expect(consumer.buffered).toBe(0);
      // ...and a take waits 300 ms for it (its timer armed once its microtasks ran) while, from
      // the next turn of the event loop, this thread is held for 1,000 ms.
      const waiting = consumer.takeBlocks(1, { timeoutMs: 300 });
      await new Promise<void>((resolve) =>
        setImmediate(() => {
          const heldUntil = performance.now() + 1000;
          while (performance.now() < heldUntil) {
            // The application's own loop, never yielding.
          }
          resolve();
        }),
      );
      expect(await waiting).toHaveLength(1);
    } finally {
      await consumer.close();
    }
  });

  it('depth refills through the refill processor when consumed below threshold', async () => {
    const bizTag = await newTag('refill');
    const redis = new Redis(env('REDIS_URL'));
    const meta = new RedisPoolMeta({ redis, keyPrefix: `${uniqueName('kafka-test')}:` });
    const processor = createRefillProcessor({ store: ts.store, sinks: { kafka: sink }, meta, minDepth: 2000, maxDepth: 2000 });
    const consumer = new KafkaPoolConsumer({ verifyKey: TEST_VERIFY_KEY, kafka, bizTag });
    try {
      expect(await processor.refill(bizTag, 0, 'threshold')).toMatchObject({ status: 'pushed' });
      const full = await sink.depth(bizTag, 0);
      expect(full).toBeGreaterThanOrEqual(2000);

      const taken = await consumer.take(full - 200, { timeoutMs: 20_000 });
      expectNoDuplicates(taken);
      expect(taken.length).toBe(full - 200);
      expect(await sink.depth(bizTag, 0)).toBeLessThan(400);

      expect(await processor.refill(bizTag, 0, 'threshold')).toMatchObject({ status: 'pushed' });
      // The running consumer may already have committed some of the new blocks into its buffer.
      expect((await sink.depth(bizTag, 0)) + consumer.buffered).toBeGreaterThanOrEqual(2000);
      const more = await consumer.take(1000, { timeoutMs: 20_000 });
      const merged = [...taken, ...more];
      expectNoDuplicates(merged);
      expect(merged.length).toBe(taken.length + 1000);
    } finally {
      await consumer.close();
      redis.disconnect();
    }
  });

  it('two consumer processes on one tag, one SIGKILLed mid-block: zero duplicates, at most one block lost', async () => {
    const bizTag = await newTag('kill');
    const total = 20_000;
    for (let i = 0; i < total / 1000; i++) await sink.push(await ts.store.allocate(bizTag, 1000));
    expect(await sink.depth(bizTag, 0)).toBe(total);

    const outputs = new Map<ChildProcess, string[]>();
    const spawnConsumer = (): Promise<ChildProcess> =>
      new Promise((resolve, reject) => {
        const child = spawn(process.execPath, ['--import', 'tsx', fixture], {
          cwd: root,
          env: { ...process.env, POOL_TAG: bizTag, PAUSE_MS: '5' },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        children.push(child);
        const ids: string[] = [];
        outputs.set(child, ids);
        let rest = '';
        let stderr = '';
        child.stdout!.on('data', (chunk: Buffer) => {
          const lines = (rest + chunk.toString()).split('\n');
          rest = lines.pop() ?? '';
          for (const line of lines) {
            if (line === 'ready') resolve(child);
            else if (line.startsWith('ids ')) ids.push(...line.slice(4).split(' '));
          }
        });
        child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
        child.on('exit', (code) => reject(new Error(`pool consumer exited with ${code} before ready: ${stderr}`)));
      });

    const [a, b] = await Promise.all([spawnConsumer(), spawnConsumer()]);
    const idsOf = (c: ChildProcess) => outputs.get(c)!;
    await until('both consumers serving', () => idsOf(a).length >= 500 && idsOf(b).length >= 500, {
      detail: () => `a=${idsOf(a).length} b=${idsOf(b).length}`,
    });
    a.kill('SIGKILL');
    await new Promise((r) => a.once('exit', r));
    const bAtKill = idsOf(b).length;

    // B takes over A's partition once A's session expires, and drains the topic.
    let last = -1;
    await until(
      'B to drain the topic and stop taking',
      async () => {
        const settled = (await sink.depth(bizTag, 0)) === 0 && idsOf(b).length === last;
        last = idsOf(b).length;
        return settled;
      },
      { intervalMs: 1000, detail: () => `b=${idsOf(b).length}` },
    );
    const exited = new Promise<number | null>((r) => b.once('exit', (code) => r(code)));
    b.kill('SIGTERM');
    expect(await exited).toBe(0);

    const all = [...idsOf(a), ...idsOf(b)];
    expectNoDuplicates(all);
    expect(idsOf(b).length).toBeGreaterThan(bAtKill);
    // A crash loses at most the blocks A held (invariant 2: committed before hand-out: its buffer of
    // KAFKA_POOL_CONSUMER_DEFAULTS.bufferBlocks blocks of 100), never repeats them.
    expect(all.length).toBeLessThanOrEqual(total);
    expect(all.length).toBeGreaterThanOrEqual(total - KAFKA_POOL_CONSUMER_DEFAULTS.bufferBlocks * 100);
  }, 120_000);
});
