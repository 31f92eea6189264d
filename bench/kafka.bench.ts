/**
 * Kafka request/reply: latency p50/p99 at a fixed 100 and 1,000 requests/s (count=1, open
 * loop), and IDs/s with count=1000 (closed loop, 32 requests in flight). One responder
 * (workers/responder.ts) in its own process over Postgres; the client in this process.
 * Servers: KAFKA_BROKERS and DATABASE_URL from the environment or .infra/env.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../test/support/spawn.js';
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { createKafka } from '../src/kafka/kafkajs/client.js';
import { kafkaJsDriverOf } from '../src/kafka/kafkajs/index.js';
import { checkKafkaDriver } from '../src/kafka/driver.js';
import { blocksSize, type Block } from '../src/core/block.js';
import { createKafkaClient } from '../src/client/kafka/rpc-client.js';
import type { IdmintKafkaClient } from '../src/client/kafka/rpc-client.js';
import { ensureTopics } from '../src/kafka/topics.js';
import { PostgresBizStore } from '../src/store/biz-store.js';
import { migrate } from '../src/store/migrations.js';
import { createPgDatabase } from '../src/store/pg.js';
import { duplicatesInTyped, median, perSecond, table, type Section } from './lib.js';
import { TEST_SIGNING_SECRET, TEST_VERIFY_KEY } from '../test/support/signing.js';

const root = fileURLToPath(new URL('../', import.meta.url));
const ROUNDS = 3;
const ROUND_SECONDS = 5;
/** The Kafka driver of the client and of the responder it spawns (IDMINT_KAFKA_DRIVER, default kafkajs). */
const driver = checkKafkaDriver(process.env.IDMINT_KAFKA_DRIVER || undefined);

function server(name: 'KAFKA_BROKERS' | 'DATABASE_URL'): string {
  if (process.env[name]) return process.env[name]!;
  const file = `${root}.infra/env`;
  const m = existsSync(file) ? new RegExp(`^export ${name}=(.*)$`, 'm').exec(readFileSync(file, 'utf8')) : null;
  if (!m?.[1]) throw new Error(`${name} is not set and .infra/env lacks it: run \`npm run infra:up\``);
  return m[1];
}

/** Every ID received, as numbers (segment IDs are < 2^53): 10 M strings would make the bench a GC benchmark. */
class IdLog {
  values = new Float64Array(1 << 20);
  length = 0;
  add(ids: readonly string[]): void {
    if (this.length + ids.length > this.values.length) {
      const grown = new Float64Array(Math.max(this.values.length * 2, this.length + ids.length));
      grown.set(this.values.subarray(0, this.length));
      this.values = grown;
    }
    for (const id of ids) this.values[this.length++] = Number(id);
  }
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN;
}

/** Open loop: `rate` requests/s for `seconds`, sent on a 10 ms tick whatever the replies do. */
async function latencyAt(
  client: IdmintKafkaClient,
  rate: number,
  seconds: number,
  ids: IdLog,
): Promise<{ p50: number; p99: number; max: number; n: number; errors: number }> {
  const latencies: number[] = [];
  let errors = 0;
  const inFlight: Promise<void>[] = [];
  const t0 = performance.now();
  for (let tick = 0; tick < seconds * 100; tick++) {
    const due = t0 + tick * 10;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const batch = Math.floor(((tick + 1) * rate) / 100) - Math.floor((tick * rate) / 100);
    for (let i = 0; i < batch; i++) {
      const started = performance.now();
      inFlight.push(
        client.getIds('bench', 1, { timeoutMs: 5000 }).then(
          (got) => {
            latencies.push(performance.now() - started);
            ids.add(got);
          },
          () => void errors++,
        ),
      );
    }
  }
  await Promise.all(inFlight);
  latencies.sort((a, b) => a - b);
  return { p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99), max: latencies.at(-1) ?? NaN, n: latencies.length, errors };
}

/** A closed loop: `inFlight` callers each repeating `once` (which asks for `count` IDs) for `seconds`. */
async function closedLoop(count: number, seconds: number, inFlight: number, once: () => Promise<void>): Promise<{ rate: number; requests: number }> {
  let requests = 0;
  const end = performance.now() + seconds * 1000;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < end) {
        await once();
        requests++;
      }
    }),
  );
  return { rate: (requests * count) / ((performance.now() - t0) / 1000), requests };
}

/** `"as":"blocks"` replies: `count` IDs as ranges. */
function blocksPerSecond(
  client: IdmintKafkaClient,
  count: number,
  seconds: number,
  inFlight: number,
  into: Block[],
): Promise<{ rate: number; requests: number }> {
  return closedLoop(count, seconds, inFlight, async () => {
    const got = await client.getBlocks('bench', count, { timeoutMs: 10_000 });
    if (blocksSize(got.blocks) !== count) throw new Error(`asked ${count} as blocks, got ${blocksSize(got.blocks)}`);
    into.push(...got.blocks);
  });
}

/** Overlaps among the blocks, and list IDs that fall inside a block: both must be 0. */
function repeats(blocks: Block[], ids: Float64Array): number {
  const sorted = [...blocks].sort((a, b) => a.start - b.start);
  let bad = 0;
  for (let i = 1; i < sorted.length; i++) if (sorted[i]!.start <= sorted[i - 1]!.end) bad++;
  for (const id of ids) {
    let lo = 0;
    let hi = sorted.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const b = sorted[mid]!;
      if (id < b.start) hi = mid - 1;
      else if (id > b.end) lo = mid + 1;
      else {
        bad++;
        break;
      }
    }
  }
  return bad;
}

function idsPerSecond(client: IdmintKafkaClient, count: number, seconds: number, inFlight: number, ids: IdLog): Promise<{ rate: number; requests: number }> {
  return closedLoop(count, seconds, inFlight, async () => {
    const got = await client.getIds('bench', count, { timeoutMs: 10_000 });
    if (got.length !== count) throw new Error(`asked ${count}, got ${got.length}`);
    ids.add(got);
  });
}

function startResponder(env: NodeJS.ProcessEnv): Promise<ChildProcess> {
  // It signs with the key the bench's client verifies with.
  const child = spawn(process.execPath, ['--import', 'tsx', 'workers/responder.ts'], {
    cwd: root,
    env: { ...env, IDMINT_SIGNING_KEY: TEST_SIGNING_SECRET },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => {
      output += c.toString();
      if (output.includes('"msg":"responder ready"')) resolve(child);
    });
    child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
    child.on('exit', (code) => reject(new Error(`responder exited with ${code}: ${output}`)));
  });
}

export async function run(): Promise<Section> {
  const brokers = server('KAFKA_BROKERS');
  const databaseUrl = server('DATABASE_URL');
  const suffix = randomBytes(4).toString('hex');
  const schema = `bench_kafka_${suffix}`;
  const requestTopic = `idmint.requests.bench-${suffix}`;
  const kafka = createKafka({ brokers, clientId: 'idmint-bench' });
  const admin = kafkaJsDriverOf(kafka).admin();
  const db = createPgDatabase({ connectionString: databaseUrl, schema });
  let responder: ChildProcess | undefined;
  let client: IdmintKafkaClient | undefined;
  try {
    await migrate(db);
    await new PostgresBizStore(db).createBiz({ bizTag: 'bench', step: 100_000 });
    await admin.connect();
    await ensureTopics(admin, [{ topic: requestTopic, numPartitions: 4 }]);
    responder = await startResponder({
      ...process.env,
      KAFKA_BROKERS: brokers,
      DATABASE_URL: databaseUrl,
      IDMINT_PG_SCHEMA: schema,
      // Its own port and data dir, and no Redis or ZooKeeper: the responder alone, over Postgres.
      IDMINT_PORT: String(await freePort()),
      IDMINT_DATA_DIR: mkdtempSync(join(tmpdir(), 'idmint-bench-responder-')),
      REDIS_URL: '',
      ZK_CONNECT: '',
      IDMINT_KAFKA_REQUEST_TOPIC: requestTopic,
      IDMINT_KAFKA_RESPONDER_GROUP: `idmint.responders.bench-${suffix}`,
      LOG_LEVEL: 'info',
    });
    client = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka: { brokers, clientId: 'bench', driver }, requestTopic, clientId: 'bench' });
    await client.start();
    const ids = new IdLog();
    await latencyAt(client, 100, 2, new IdLog()); // warm-up: JIT, connections, the first segments
    const rows: Array<Array<string | number>> = [];
    for (const rate of [100, 1000]) {
      // Three rounds; the median round's p99 says what is typical, the worst shows the shared machine's stalls.
      const rounds = [];
      for (let i = 0; i < ROUNDS; i++) rounds.push(await latencyAt(client, rate, ROUND_SECONDS, ids));
      const p50 = median(rounds.map((r) => r.p50));
      const p99 = median(rounds.map((r) => r.p99));
      const target = rate === 1000 ? (p99 < 20 ? '< 20 ms: met' : '< 20 ms: **missed**') : '';
      rows.push([
        `${rate} req/s, count=1`,
        rounds.reduce((n, r) => n + r.n, 0),
        p50.toFixed(2),
        p99.toFixed(2),
        rounds.map((r) => r.p99.toFixed(1)).join(' / '),
        Math.max(...rounds.map((r) => r.max)).toFixed(1),
        rounds.reduce((n, r) => n + r.errors, 0),
        target,
      ]);
    }
    const t = await idsPerSecond(client, 1000, 10, 32, ids);
    const blocks: Block[] = [];
    await blocksPerSecond(client, 1_000_000, 2, 4, blocks); // warm-up: the buffer's step grows
    const b = await blocksPerSecond(client, 1_000_000, 10, 8, blocks);
    const dups = duplicatesInTyped(ids.values.subarray(0, ids.length)) + repeats(blocks, ids.values.subarray(0, ids.length));
    return {
      title: `Kafka request/reply (bench/kafka.bench.ts)${driver === 'kafkajs' ? '' : `, driver ${driver}`}`,
      body: [
        'One responder (`workers/responder.ts`, Postgres segments into in-memory double buffers, step 100,000) in its own process; the client (`IdmintKafkaClient`) in the bench process; single-node Kafka 3.9 from `scripts/infra.sh`, request topic with 4 partitions. Latency is send-to-reply in the client, open loop on a 10 ms tick, 3 rounds of 5 s per rate after a 2 s warm-up.',
        '',
        table(['load', 'replies', 'p50 ms (median round)', 'p99 ms (median round)', 'p99 per round', 'max ms', 'errors', 'target'], rows),
        '',
        table(
          ['load', 'requests', 'IDs/s', 'target'],
          [
            [`count=1000, 32 in flight, 10 s`, t.requests, perSecond(t.rate), t.rate >= 1e6 ? '≥ 1 M: met' : '≥ 1 M: **missed**'],
            [`\`"as":"blocks"\`, count=1,000,000, 8 in flight, 10 s`, b.requests, perSecond(b.rate), b.rate >= 50e6 ? '≥ 50 M: met' : '≥ 50 M: **missed**'],
          ],
        ),
        '',
        `Duplicates over all ${(ids.length + blocksSize(blocks)).toLocaleString('en-US')} IDs received (lists and blocks, blocks checked for overlaps with each other and with every list ID): ${dups}. Load average at the end: ${os.loadavg()[0]!.toFixed(1)} on ${os.availableParallelism()} CPUs (the machine is shared).`,
      ].join('\n'),
    };
  } finally {
    await client?.close().catch(() => undefined);
    if (responder && responder.exitCode === null) {
      const exited = new Promise((r) => responder!.once('exit', r));
      responder.kill('SIGTERM');
      await exited;
    }
    await admin.deleteTopics([requestTopic]).catch(() => undefined);
    await admin.close().catch(() => undefined);
    await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await db.close();
  }
}
