/**
 * The SDK's Kafka pool reader on each Kafka driver, side by side: a tag's pool topic (4
 * partitions) filled with 20,000 signed blocks of 1,000 IDs by one sink, then drained by one
 * KafkaPoolConsumer (bufferBlocks 64, commit before hand-out) per driver, alternating, 3 rounds
 * each. Reports the start (group joined), the first block, and the drain rate after it.
 * Servers: KAFKA_BROKERS from the environment or .infra/env.
 */
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { KafkaPoolConsumer } from '../src/client/kafka/pool-consumer.js';
import { KAFKA_DRIVERS, type KafkaDriverName } from '../src/kafka/ports.js';
import { KafkaPoolSink } from '../src/pool/kafka/sink.js';
import { TEST_VERIFY_KEY, testSigner } from '../test/support/signing.js';
import { median, perSecond, table, type Section } from './lib.js';

const root = fileURLToPath(new URL('../', import.meta.url));
const BLOCKS = 20_000;
const BLOCK_SIZE = 1000;
const ROUNDS = 3;

function brokers(): string {
  if (process.env.KAFKA_BROKERS) return process.env.KAFKA_BROKERS;
  const file = `${root}.infra/env`;
  const m = existsSync(file) ? /^export KAFKA_BROKERS=(.*)$/m.exec(readFileSync(file, 'utf8')) : null;
  if (!m?.[1]) throw new Error('KAFKA_BROKERS is not set and .infra/env lacks it: run `npm run infra:up`');
  return m[1];
}

interface Drain {
  startMs: number;
  firstBlockMs: number;
  idsPerSecond: number;
  duplicates: number;
}

async function drain(driver: KafkaDriverName, kafka: string, round: number): Promise<Drain> {
  const bizTag = `bench-drivers-${driver}-${round}-${Date.now()}`;
  const sink = new KafkaPoolSink({ signer: testSigner, kafka: { brokers: kafka, clientId: 'bench-drivers-sink' }, blockSize: BLOCK_SIZE, partitions: 4 });
  const consumer = new KafkaPoolConsumer({
    verifyKey: TEST_VERIFY_KEY,
    kafka: { brokers: kafka, clientId: 'bench-drivers', driver },
    bizTag,
    bufferBlocks: 64,
  });
  try {
    const segment = 100 * BLOCK_SIZE;
    for (let i = 0; i < (BLOCKS * BLOCK_SIZE) / segment; i++) await sink.push({ bizTag, shard: 0, start: 1 + i * segment, end: (i + 1) * segment });
    const t0 = performance.now();
    await consumer.start();
    const started = performance.now();
    const seen = new Set<number>();
    let ids = 0;
    let duplicates = 0;
    let first = 0;
    while (ids < BLOCKS * BLOCK_SIZE) {
      const got = await consumer.takeBlocks(100_000, { timeoutMs: 10_000 });
      if (got.length === 0) throw new Error(`${driver}: the pool ran dry after ${ids} of ${BLOCKS * BLOCK_SIZE} IDs`);
      first ||= performance.now();
      for (const b of got) {
        if (seen.has(b.start)) duplicates++;
        seen.add(b.start);
        ids += b.end - b.start + 1;
      }
    }
    const done = performance.now();
    return { startMs: started - t0, firstBlockMs: first - started, idsPerSecond: ids / ((done - first) / 1000), duplicates };
  } finally {
    await consumer.close().catch(() => undefined);
    await sink.deleteTopics(bizTag).catch(() => undefined);
    await sink.close().catch(() => undefined);
  }
}

export async function run(): Promise<Section> {
  const kafka = brokers();
  const results = new Map<KafkaDriverName, Drain[]>(KAFKA_DRIVERS.map((d) => [d, []]));
  for (let round = 0; round < ROUNDS; round++) for (const driver of KAFKA_DRIVERS) results.get(driver)!.push(await drain(driver, kafka, round));
  const rows = KAFKA_DRIVERS.map((driver) => {
    const r = results.get(driver)!;
    return [
      driver,
      median(r.map((x) => x.startMs)).toFixed(0),
      median(r.map((x) => x.firstBlockMs)).toFixed(0),
      perSecond(median(r.map((x) => x.idsPerSecond))),
      r.map((x) => perSecond(x.idsPerSecond)).join(' / '),
      r.reduce((n, x) => n + x.duplicates, 0),
    ];
  });
  return {
    title: 'Kafka pool reader per driver (bench/kafka-drivers.bench.ts)',
    body: [
      `One \`KafkaPoolConsumer\` (bufferBlocks 64) drains a fresh pool topic (4 partitions, ${BLOCKS.toLocaleString('en-US')} signed blocks of ${BLOCK_SIZE.toLocaleString('en-US')} IDs, published by one sink before it starts), taking up to 100,000 IDs per \`takeBlocks\`; ${ROUNDS} rounds per driver, alternating. Start: \`start()\` until the group is joined; first block: from then to the first IDs handed out; rate: IDs handed out per second after the first block (each fetch's blocks verified, then committed before hand-out).`,
      '',
      table(['driver', 'start ms (median)', 'first block ms (median)', 'IDs/s (median)', 'IDs/s per round', 'duplicates'], rows),
      '',
      `Load average at the end: ${os.loadavg()[0]!.toFixed(1)} on ${os.availableParallelism()} CPUs (the machine is shared).`,
    ].join('\n'),
  };
}
