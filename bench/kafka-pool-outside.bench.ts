/**
 * Kafka pool topics in the shape an outside probe ran (issue 40): `idmint serve` with every role
 * (api, refill with its Kafka pool watch, responder) in its own process, and in another process 4
 * SDK instances with their default options, each calling `await next()` in a plain loop that never
 * yields to the event loop itself. The kafka-pool module runs the refill in its own process and
 * lets the event loop in every 4,096 calls; this one does neither. Per second of the run: IDs
 * handed out and POOL_EMPTY answers. Private Kafka, Postgres and Redis.
 * Reproduce: `npm run bench -- kafka-pool-outside`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IdmintClient } from '../src/client/client.js';
import { kafkaPoolTransport } from '../src/client/kafka/transports.js';
import { isIdmintError } from '../src/core/errors.js';
import { startPrivateServer } from '../test/support/servers.js';
import { TEST_VERIFY_KEY } from '../test/support/signing.js';
import { spawnServer } from '../test/support/spawn.js';
import { table, type Section } from './lib.js';

const INSTANCES = 4;
const WARM_MS = 10_000;
const MEASURE_MS = 10_000;
const TOKEN = 'bench-outside';

const m = (n: number): string => `${(n / 1e6).toFixed(2)} M`;

interface Instance {
  ids: number;
  empty: number;
  /** POOL_EMPTY answers, by whole second since the start of the measurement. */
  emptyAt: number[];
}

/** One instance's loop, as an application writes it: `await next()` and nothing else. */
async function loop(client: IdmintClient, bizTag: string, into: Instance, until: number, measureFrom: number): Promise<void> {
  const tag = client.tag(bizTag);
  while (performance.now() < until) {
    // The clock is read every 1,024 calls only; the loop itself never yields to the event loop.
    const measuring = performance.now() >= measureFrom;
    for (let j = 0; j < 1024; j++) {
      try {
        await tag.next();
        if (measuring) into.ids++;
      } catch (err) {
        if (!isIdmintError(err) || err.code !== 'POOL_EMPTY') throw err;
        const now = performance.now();
        if (now >= measureFrom) {
          into.empty++;
          into.emptyAt.push(Math.floor((now - measureFrom) / 1000));
        }
      }
    }
  }
}

async function firstId(client: IdmintClient, bizTag: string): Promise<void> {
  const deadline = performance.now() + 60_000;
  for (;;) {
    try {
      await client.next(bizTag);
      return;
    } catch (err) {
      if (!isIdmintError(err) || !['NOT_READY', 'POOL_EMPTY'].includes(err.code) || performance.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

export async function run(): Promise<Section> {
  const [kafka, postgres, redis] = await Promise.all([startPrivateServer('kafka'), startPrivateServer('postgres'), startPrivateServer('redis')]);
  const dataDir = mkdtempSync(join(tmpdir(), 'idmint-bench-outside-'));
  const server = await spawnServer(
    { IDMINT_DATA_DIR: dataDir, DATABASE_URL: postgres.url, REDIS_URL: redis.url, KAFKA_BROKERS: kafka.url, IDMINT_ADMIN_TOKEN: TOKEN, LOG_LEVEL: 'warn' },
    { timeoutMs: 120_000 },
  );
  const clients: IdmintClient[] = [];
  try {
    const bizTag = 'outside';
    const made = await fetch(`${server.url}/v1/biz`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ bizTag, pool: 'kafka', step: 1000 }),
    });
    if (made.status !== 201) throw new Error(`creating the tag: ${made.status} ${await made.text()}`);
    for (let i = 0; i < INSTANCES; i++) {
      clients.push(
        new IdmintClient({ transport: kafkaPoolTransport({ verifyKey: TEST_VERIFY_KEY, kafka: { brokers: [kafka.url], clientId: `bench-outside-${i}` } }) }),
      );
    }
    // The tag's topic appears with the refill's first fill: until then a take says NOT_READY.
    await Promise.all(clients.map((c) => firstId(c, bizTag)));
    const instances: Instance[] = clients.map(() => ({ ids: 0, empty: 0, emptyAt: [] }));
    const started = performance.now();
    const measureFrom = started + WARM_MS;
    const until = measureFrom + MEASURE_MS;
    await Promise.all(clients.map((c, i) => loop(c, bizTag, instances[i]!, until, measureFrom)));
    const secs = MEASURE_MS / 1000;
    const rows = instances.map((x, i) => [i + 1, `${m(x.ids / secs)}/s`, x.empty, x.emptyAt.length === 0 ? '—' : [...new Set(x.emptyAt)].join(', ')]);
    const total = instances.reduce((a, x) => a + x.ids, 0) / secs;
    const slowest = Math.min(...instances.map((x) => x.ids / secs));
    const empties = instances.reduce((a, x) => a + x.empty, 0);
    return {
      title: 'Kafka pool topics from outside: `idmint serve` in its own process, 4 SDK instances looping on `await next()`',
      body: [
        `\`idmint serve\` with every role (api, refill with its Kafka pool watch, responder) in its own process, signing blocks; in the bench process ${INSTANCES} SDK instances with their default options (bufferBlocks 4, takeTimeoutMs 1000), each an \`await tag.next()\` loop that never yields to the event loop itself. ${WARM_MS / 1000} s of warm-up, ${MEASURE_MS / 1000} s measured; private Kafka, Postgres 15 and Redis on loopback; the server, Kafka and the bench share the 2 cores.`,
        '',
        table(['Instance', '`await next()`', 'POOL_EMPTY after the warm-up', 'In second(s)'], rows),
        '',
        `- Together ${m(total)}/s; each ≥ 1 M IDs/s: ${slowest >= 1e6 ? 'met' : 'not met'} (slowest ${m(slowest)}/s).`,
        `- 0 POOL_EMPTY after the warm-up: ${empties === 0 ? 'met' : `not met (${empties})`}.`,
        '',
        'Command: `npm run bench -- kafka-pool-outside`.',
      ].join('\n'),
    };
  } finally {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
    await Promise.all([kafka.close(), postgres.close(), redis.close()]);
  }
}
