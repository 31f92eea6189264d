import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafka } from '../../src/kafka/kafkajs/client.js';
import { createKafkaClient, type IdmintKafkaClient } from '../../src/client/kafka/rpc-client.js';
import { topicAdmin } from '../support/kafka.js';
import { ensureTopics } from '../../src/kafka/topics.js';
import { spawnServer, untilReady, type SpawnedServer } from '../support/spawn.js';
import { expectNoDuplicates } from '../support/unique.js';
import { TEST_VERIFY_KEY } from '../support/signing.js';

const TOKEN = 'distributed-admin-token';

// `idmint serve` with every server named: Postgres segments, Redis pools with BullMQ refills,
// the Kafka responder and a ZooKeeper worker id, all in one process, as a user starts it.
describe('idmint serve with Postgres, Redis, Kafka and ZooKeeper', () => {
  const run = randomBytes(4).toString('hex');
  const schema = `idmint_dist_${run}`;
  const requestTopic = `test.requests.${run}`;
  let dataDir: string;
  let server: SpawnedServer;
  let client: IdmintKafkaClient;
  let db: pg.Client;

  beforeAll(async () => {
    const need = (name: string): string => {
      const value = process.env[name];
      if (!value) throw new Error(`${name} is not set: the vitest global setup should have started the servers`);
      return value;
    };
    const [DATABASE_URL, REDIS_URL, KAFKA_BROKERS, ZK_CONNECT] = ['DATABASE_URL', 'REDIS_URL', 'KAFKA_BROKERS', 'ZK_CONNECT'].map(need) as [
      string,
      string,
      string,
      string,
    ];
    db = new pg.Client({ connectionString: DATABASE_URL });
    await db.connect();
    await db.query(`CREATE SCHEMA ${schema}`);
    const url = new URL(DATABASE_URL);
    url.searchParams.set('options', `-c search_path=${schema}`);

    const kafka = createKafka({ brokers: KAFKA_BROKERS, clientId: `test-${run}` });
    const admin = topicAdmin(kafka);
    await admin.connect();
    await ensureTopics(admin, [{ topic: requestTopic, numPartitions: 2 }]);
    await admin.close();

    dataDir = mkdtempSync(join(tmpdir(), 'idmint-dist-'));
    server = await spawnServer({
      DATABASE_URL: url.toString(),
      REDIS_URL,
      KAFKA_BROKERS,
      ZK_CONNECT,
      IDMINT_DATA_DIR: dataDir,
      IDMINT_ADMIN_TOKEN: TOKEN,
      IDMINT_POOL_KEY_PREFIX: `dist${run}:`,
      IDMINT_REFILL_QUEUE: `dist-${run}`,
      IDMINT_KAFKA_REQUEST_TOPIC: requestTopic,
      IDMINT_KAFKA_RESPONDER_GROUP: `dist.responders.${run}`,
      IDMINT_KAFKA_SESSION_TIMEOUT_MS: '6000',
    });
    client = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, brokers: KAFKA_BROKERS, requestTopic, clientId: `dist-client-${run}` });
    await client.start();
  });

  afterAll(async () => {
    await client?.close();
    await server?.stop('SIGTERM');
    rmSync(dataDir, { recursive: true, force: true });
    await db?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await db?.end();
  });

  it('seeds no demo tag into a shared Postgres (only the embedded default gets one)', async () => {
    const { tags } = (await (await fetch(`${server.url}/v1/biz`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as {
      tags: Array<{ bizTag: string }>;
    };
    expect(tags.map((t) => t.bizTag)).not.toContain('demo');
  });

  it('reports every dependency ready, with its worker id from ZooKeeper', async () => {
    const report = await untilReady(server.url, { output: server.output });
    expect(report.checks.snowflake?.message).toMatch(/from zookeeper/);
    expect(Object.keys(report.checks).sort()).toEqual(['database', 'kafka', 'redis', 'refill', 'segment-fence', 'snowflake', 'zookeeper']);
  });

  it('hands out one tag over HTTP and Kafka at once with zero duplicates, from the Redis pool', async () => {
    const created = await fetch(`${server.url}/v1/biz`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ bizTag: 'order', step: 2000, fallback: 'segment' }),
    });
    expect(created.status).toBe(201);

    const ids: string[] = [];
    const sources = new Set<string>();
    const overHttp = Array.from({ length: 8 }, async () => {
      for (let i = 0; i < 100; i++) {
        const body = (await (await fetch(`${server.url}/v1/ids/order?count=100`)).json()) as { ids: string[]; source: string };
        ids.push(...body.ids);
        sources.add(body.source);
      }
    });
    const overKafka = Array.from({ length: 8 }, async () => {
      for (let i = 0; i < 50; i++) {
        const reply = await client.get('order', 100, { timeoutMs: 20_000 });
        ids.push(...reply.ids);
        sources.add(reply.source);
      }
    });
    await Promise.all([...overHttp, ...overKafka]);

    expect(ids).toHaveLength(8 * 100 * 100 + 8 * 50 * 100);
    expectNoDuplicates(ids);
    expect(sources.has('pool')).toBe(true);
    const stats = (await (await fetch(`${server.url}/v1/stats`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as {
      pools: Array<{ bizTag: string; kind: string }>;
    };
    expect(stats.pools.some((p) => p.bizTag === 'order' && p.kind === 'redis-counter')).toBe(true);
  });

  it('answers a Kafka request for an unknown tag with an error reply', async () => {
    await expect(client.get('no-such-tag', 1, { timeoutMs: 20_000 })).rejects.toMatchObject({ code: 'UNKNOWN_BIZ_TAG' });
  });
});
