/**
 * Kafka pool topics at rates: 1, 4 and 16 SDK instances of one tag (each its own Kafka client,
 * consumer and IdmintClient, as pods would have; they share this bench process and its one
 * thread), fed by the refill processor and its Kafka pool watch (demand from committed offsets,
 * threshold refills), blocks signed. Per instance count: aggregate IDs/s with the bulk take
 * (`tryNextNumbers`, awaiting `nextNumber` only when the buffer is empty), IDs/s with `await
 * next()`, the slowest instance, p50/p99 of `next()`, and POOL_EMPTY answers after the warm-up.
 * Beside them, the peers: the same instance counts over Kafka request/reply and over HTTP blocks
 * to one `idmint serve` process. Private Kafka, Postgres and Redis. Reproduce: `npm run bench -- kafka-pool`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { IdmintClient } from '../src/client/client.js';
import { createKafkaClient } from '../src/client/kafka/rpc-client.js';
import { kafkaPoolTransport, kafkaTransport } from '../src/client/kafka/transports.js';
import type { IdTransport } from '../src/client/transport.js';
import { isIdmintError } from '../src/core/errors.js';
import { silentLogger } from '../src/core/logger.js';
import { createKafka } from '../src/kafka/kafkajs/client.js';
import { KafkaPoolSink } from '../src/pool/kafka/sink.js';
import { KafkaPoolWatch } from '../src/pool/kafka/watch.js';
import { RedisPoolMeta } from '../src/pool/redis/meta.js';
import { createRefillProcessor, type RefillProcessor } from '../src/refill/processor.js';
import { PostgresBizStore } from '../src/store/biz-store.js';
import { migrate } from '../src/store/migrations.js';
import { createPgDatabase } from '../src/store/pg.js';
import { inlineRefillTrigger } from '../test/support/refill-trigger.js';
import { startPrivateServer } from '../test/support/servers.js';
import { spawnServer } from '../test/support/spawn.js';
import { table, type Section } from './lib.js';
import { TEST_VERIFY_KEY, testSigner } from '../test/support/signing.js';

const WARM_MS = 5000;
const MEASURE_MS = 5000;

/** Counts POOL_EMPTY answers of the transport once `counting` is on. */
function counted(transport: IdTransport, counter: { on: boolean; empty: number }): IdTransport {
  const wrap = (f: (t: string, n: number) => ReturnType<IdTransport['fetch']>) => async (t: string, n: number) => {
    try {
      return await f(t, n);
    } catch (err) {
      if (counter.on && isIdmintError(err) && err.code === 'POOL_EMPTY') counter.empty++;
      throw err;
    }
  };
  return { fetch: wrap((t, n) => transport.fetch(t, n)), fetchBlocks: wrap((t, n) => transport.fetchBlocks!(t, n)), close: () => transport.close() };
}

/** True when the call gave an ID; false on POOL_EMPTY (counted by the transport wrapper), which the loop asks again after. */
async function dryIsEmpty(call: Promise<unknown>): Promise<boolean> {
  try {
    await call;
    return true;
  } catch (err) {
    if (isIdmintError(err) && err.code === 'POOL_EMPTY') return false;
    throw err;
  }
}

interface Measured {
  total: number;
  perInstance: number[];
  p50?: number;
  p99?: number;
}

async function bulk(clients: IdmintClient[], bizTag: string, ms: number): Promise<Measured> {
  const perInstance = clients.map(() => 0);
  const until = performance.now() + ms;
  const started = performance.now();
  await Promise.all(
    clients.map(async (c, i) => {
      const into = new Float64Array(65_536);
      while (performance.now() < until) {
        const n = c.tryNextNumbers(bizTag, into);
        if (n > 0) perInstance[i]! += n;
        else if (await dryIsEmpty(c.nextNumber(bizTag))) perInstance[i]! += 1;
        // Let the other instances and the consumers' fetch loops run.
        await new Promise<void>((r) => setImmediate(r));
      }
    }),
  );
  const secs = (performance.now() - started) / 1000;
  return { total: perInstance.reduce((a, b) => a + b, 0) / secs, perInstance: perInstance.map((n) => n / secs) };
}

async function awaitNext(clients: IdmintClient[], bizTag: string, ms: number): Promise<Measured> {
  const perInstance = clients.map(() => 0);
  const samples: number[] = [];
  const until = performance.now() + ms;
  const started = performance.now();
  await Promise.all(
    clients.map(async (c, i) => {
      const tag = c.tag(bizTag);
      let n = 0;
      // The clock is read and the other instances let in every 4,096 calls: reading it on each
      // call would cost as much as the call.
      while (performance.now() < until) {
        for (let j = 0; j < 4096; j++) {
          try {
            // Every 64th call is timed.
            if ((j & 63) === 0) {
              const t0 = performance.now();
              await tag.next();
              samples.push(performance.now() - t0);
            } else await tag.next();
            n++;
          } catch (err) {
            // POOL_EMPTY (counted by the transport wrapper): asked again.
            if (!isIdmintError(err) || err.code !== 'POOL_EMPTY') throw err;
          }
        }
        await new Promise<void>((r) => setImmediate(r));
      }
      perInstance[i] = n;
    }),
  );
  const secs = (performance.now() - started) / 1000;
  samples.sort((a, b) => a - b);
  return {
    total: perInstance.reduce((a, b) => a + b, 0) / secs,
    perInstance: perInstance.map((n) => n / secs),
    p50: samples[Math.floor(samples.length * 0.5)] ?? Number.NaN,
    p99: samples[Math.floor(samples.length * 0.99)] ?? Number.NaN,
  };
}

/**
 * One instance takes 100 IDs/s for 5 s, then as fast as it can for 5 s: how long after the step
 * its fetches still found the topic dry (POOL_EMPTY) while the watch grew the target.
 */
async function demandStep(brokers: string, store: PostgresBizStore, processor: RefillProcessor): Promise<string> {
  const bizTag = 'kpstep';
  await store.createBiz({ bizTag, pool: 'kafka', step: 1000 });
  await processor.refill(bizTag, 0, 'manual');
  const counter = { on: true, empty: 0 };
  const emptyAt: number[] = [];
  const own = createKafka({ brokers, clientId: 'bench-step', logger: silentLogger });
  const transport = counted(kafkaPoolTransport({ verifyKey: TEST_VERIFY_KEY, kafka: own, takeTimeoutMs: 1000 }), counter);
  const client = new IdmintClient({ transport, maxBatchSize: 5_000_000, timeoutMs: 30_000 });
  try {
    const slowUntil = performance.now() + 5000;
    while (performance.now() < slowUntil) {
      await dryIsEmpty(client.nextNumber(bizTag));
      await new Promise((r) => setTimeout(r, 10));
    }
    const before = counter.empty;
    const stepAt = performance.now();
    const until = stepAt + 5000;
    const into = new Float64Array(65_536);
    let n = 0;
    while (performance.now() < until) {
      const k = client.tryNextNumbers(bizTag, into);
      if (k > 0) n += k;
      else if (await dryIsEmpty(client.nextNumber(bizTag))) n++;
      else emptyAt.push(performance.now() - stepAt);
      await new Promise<void>((r) => setImmediate(r));
    }
    const lastDry = emptyAt.length === 0 ? 0 : Math.max(...emptyAt) / 1000;
    return `A step from 100 IDs/s to full speed (1 instance): POOL_EMPTY for ${lastDry.toFixed(1)} s after the step (${counter.empty - before} answers; target at most 2 s: ${lastDry <= 2 ? 'met' : 'not met'}); ${m(n / 5)}/s over the 5 s after it.`;
  } finally {
    await client.close();
  }
}

const m = (n: number): string => `${(n / 1e6).toFixed(2)} M`;

/**
 * The peers: the same instance counts on one segment tag through an `idmint serve` process (api and
 * responder roles, the tag on a Redis counter pool) over Kafka request/reply and over HTTP blocks,
 * both taking blocks, with the bulk take as above. Rows: [instances, request/reply, HTTP blocks].
 */
async function peers(
  urls: { kafka: string; postgres: string; redis: string },
  store: PostgresBizStore,
  counts: number[],
): Promise<Map<number, { kafka: Measured; http: Measured }>> {
  const dataDir = mkdtempSync(join(tmpdir(), 'idmint-bench-kpeers-'));
  const server = await spawnServer(
    { IDMINT_DATA_DIR: dataDir, DATABASE_URL: urls.postgres, REDIS_URL: urls.redis, KAFKA_BROKERS: urls.kafka, LOG_LEVEL: 'warn' },
    { timeoutMs: 120_000 },
  );
  const out = new Map<number, { kafka: Measured; http: Measured }>();
  try {
    for (const instances of counts) {
      const bizTag = `kpeer${instances}`;
      await store.createBiz({ bizTag, step: 1000 });
      const over = async (make: (i: number) => IdmintClient): Promise<Measured> => {
        const clients = Array.from({ length: instances }, (_, i) => make(i));
        try {
          await Promise.all(clients.map((c) => c.nextNumber(bizTag)));
          await bulk(clients, bizTag, 2000);
          return await bulk(clients, bizTag, MEASURE_MS);
        } finally {
          await Promise.all(clients.map((c) => c.close()));
        }
      };
      const kafka = await over((i) => {
        const own = createKafka({ brokers: urls.kafka, clientId: `bench-rr-${i}`, logger: silentLogger });
        const rpc = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka: own, clientId: `bench-rr-${i}`, timeoutMs: 30_000 });
        return new IdmintClient({ transport: kafkaTransport(rpc, { closeClient: true }), maxBatchSize: 5_000_000, timeoutMs: 30_000 });
      });
      const http = await over(() => new IdmintClient({ url: server.url, maxBatchSize: 5_000_000, timeoutMs: 30_000 }));
      out.set(instances, { kafka, http });
    }
  } finally {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
  return out;
}

export async function run(): Promise<Section> {
  const [kafkaServer, postgres, redisServer] = await Promise.all([startPrivateServer('kafka'), startPrivateServer('postgres'), startPrivateServer('redis')]);
  const db = createPgDatabase({ connectionString: postgres.url, max: 10 });
  const kafka = createKafka({ brokers: kafkaServer.url, clientId: 'bench-refill', logger: silentLogger });
  const sink = new KafkaPoolSink({ signer: testSigner, kafka });
  const redis = new Redis(redisServer.url);
  const rows: Array<Array<string | number>> = [];
  const verdicts: string[] = [];
  let stepRow = '';
  const poolBulk = new Map<number, Measured>();
  let peerRows: Array<Array<string | number>> = [];
  try {
    await migrate(db);
    const store = new PostgresBizStore(db, { owner: 'bench' });
    const meta = new RedisPoolMeta({ redis });
    const inline = inlineRefillTrigger((bizTag, shard, reason) => processor.refill(bizTag, shard, reason));
    const trigger = inline.trigger;
    // The refill role's settings at their defaults (IDMINT_POOL_SECONDS 60, IDMINT_POOL_MAX_RANGE_DEPTH 50 M, IDMINT_KAFKA_POOL_WATCH_MS 1000).
    const processor: RefillProcessor = createRefillProcessor({ store, sinks: { kafka: sink }, meta, autoKind: 'redis-counter', maxRangeDepth: 50_000_000 });
    const watch = new KafkaPoolWatch({ sink, store, meta, trigger, autoKind: 'redis-counter', tagsEveryMs: 1000 });
    watch.start();
    try {
      for (const instances of [1, 4, 16]) {
        const bizTag = `kp${instances}`;
        await store.createBiz({ bizTag, pool: 'kafka', step: 1000 });
        await processor.refill(bizTag, 0, 'manual');
        const counter = { on: false, empty: 0 };
        const clients = Array.from({ length: instances }, (_, i) => {
          const own = createKafka({ brokers: kafkaServer.url, clientId: `bench-sdk-${i}`, logger: silentLogger });
          const transport = counted(kafkaPoolTransport({ verifyKey: TEST_VERIFY_KEY, kafka: own, takeTimeoutMs: 1000, bufferBlocks: 4 }), counter);
          return new IdmintClient({ transport, maxBatchSize: 5_000_000, timeoutMs: 30_000 });
        });
        try {
          // Every instance joins the group (a dry answer at first is fine: the warm-up follows).
          await Promise.all(clients.map((c) => dryIsEmpty(c.nextNumber(bizTag))));
          await bulk(clients, bizTag, WARM_MS);
          counter.on = true;
          const b = await bulk(clients, bizTag, MEASURE_MS);
          const emptyBulk = counter.empty;
          poolBulk.set(instances, b);
          const a = await awaitNext(clients, bizTag, MEASURE_MS);
          const served = b.perInstance.filter((r) => r > 0).length;
          rows.push([
            instances,
            `${m(b.total)}/s`,
            `${m(Math.min(...b.perInstance))}/s`,
            `${m(a.total)}/s`,
            `${m(Math.min(...a.perInstance))}/s`,
            `${a.p50!.toFixed(4)} / ${a.p99!.toFixed(4)} ms`,
            `${served} of ${instances}`,
            `${emptyBulk} / ${counter.empty - emptyBulk}`,
          ]);
          if (instances === 4) {
            verdicts.push(`4 instances ≥ 20 M IDs/s together with the bulk take: ${b.total >= 20e6 ? 'met' : 'not met'} (${m(b.total)}/s).`);
            verdicts.push(
              `4 instances each ≥ 1 M IDs/s with \`await next()\`: ${Math.min(...a.perInstance) >= 1e6 ? 'met' : 'not met'} (slowest ${m(Math.min(...a.perInstance))}/s).`,
            );
          }
          if (instances === 16) verdicts.push(`16 instances every one served: ${served === 16 ? 'met' : 'not met'} (${served} of 16).`);
          verdicts.push(
            `${instances} instance${instances > 1 ? 's' : ''}: ${counter.empty} POOL_EMPTY after the ${WARM_MS / 1000} s warm-up (target 0: ${counter.empty === 0 ? 'met' : 'not met'}).`,
          );
        } finally {
          await Promise.all(clients.map((c) => c.close()));
        }
      }
      stepRow = await demandStep(kafkaServer.url, store, processor);
    } finally {
      await watch.close();
      await inline.idle();
    }
    const peer = await peers({ kafka: kafkaServer.url, postgres: postgres.url, redis: redisServer.url }, store, [1, 4, 16]);
    const cell = (x: Measured | undefined): string => (x ? `${m(x.total)}/s (slowest ${m(Math.min(...x.perInstance))}/s)` : '—');
    peerRows = [1, 4, 16].map((n) => [n, cell(poolBulk.get(n)), cell(peer.get(n)?.kafka), cell(peer.get(n)?.http)]);
    return {
      title: 'Kafka pool topics: SDK instances on one tag',
      body: [
        `Each instance is an IdmintClient over kafkaPoolTransport with its own Kafka client and consumer in group \`idmint.pool.<tag>\` (16 partitions), all in this one bench process and thread; the refill processor and its Kafka pool watch run in the same process with the refill role's defaults (a reading a second, targets up to 50 M IDs); private Kafka, Postgres 15 and Redis on loopback. Blocks are signed (Ed25519, the deployment key) and verified by every instance. ${WARM_MS / 1000} s of warm-up with the bulk take, then ${MEASURE_MS / 1000} s with the bulk take (\`tryNextNumbers\` into a Float64Array, awaiting \`nextNumber\` when empty) and ${MEASURE_MS / 1000} s of \`await next()\` (every 64th call timed).`,
        "Before (main at f3c2850, issue 27): 1 instance 100 IDs/s, 2 instances 0, 4 instances 50 IDs/s — one segment of the tag's step per 30-second sweep, 2 partitions.",
        '',
        table(
          [
            'Instances',
            'Bulk take, together',
            'Bulk, slowest instance',
            '`await next()`, together',
            '`next()`, slowest instance',
            '`next()` p50 / p99',
            'Instances served',
            'POOL_EMPTY (bulk / next)',
          ],
          rows,
        ),
        '',
        ...verdicts.map((v) => `- ${v}`),
        `- ${stepRow}`,
        '',
        'Beside the peers, the same instances with the bulk take: Kafka pool topics (the rows above) against one `idmint serve` process (api and responder roles; the tag on a Redis counter pool) reached over Kafka request/reply and over HTTP, both taking blocks (`"as":"blocks"`, `GET /v1/blocks`); 2 s of warm-up, 5 s measured; the server, Kafka and the bench share the 2 cores.',
        '',
        table(['Instances', 'Kafka pool topics', 'Kafka request/reply (blocks)', 'HTTP blocks'], peerRows),
        '',
        'Why the pool topics stay near 50 M IDs/s whatever the instance count: the refill keeps at most `IDMINT_POOL_MAX_RANGE_DEPTH` (50 M) IDs in a topic and the watch reads once a second, so about 50 M IDs a second is what reaches the topic; a deployment that wants more raises the depth. The peers hand out ranges of up to `maxBatchSize` (5 M) per answer from a Redis counter pool, with no such ceiling — what the pool topics buy instead is that no idmint process is on the path of a take.',
        '',
        'Command: `npm run bench -- kafka-pool`.',
      ].join('\n'),
    };
  } finally {
    await sink.close().catch(() => undefined);
    redis.disconnect();
    await db.close();
    await Promise.all([kafkaServer.close(), postgres.close(), redisServer.close()]);
  }
}
