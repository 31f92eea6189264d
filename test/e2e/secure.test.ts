import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Redis } from 'ioredis';
import zookeeper from 'node-zookeeper-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/app/config.js';
import { kafkaFor } from '../../src/app/kafka-client.js';
import { createKafka } from '../../src/kafka/kafkajs/client.js';
import { kafkaJsConfig } from '../../src/kafka/kafkajs/index.js';
import type { KafkaConnectionOptions } from '../../src/kafka/ports.js';
import { silentLogger } from '../../src/core/logger.js';
import { createKafkaClient } from '../../src/client/kafka/rpc-client.js';
import { IdmintClient } from '../../src/client/client.js';
import { kafkaPoolTransport } from '../../src/client/kafka/transports.js';
import { encodePoolBlock } from '../../src/kafka/messages.js';
import { poolTopic } from '../../src/kafka/names.js';
import { KafkaPoolSink } from '../../src/pool/kafka/sink.js';
import { runUntilExit, spawnServer, untilReady, type SpawnedServer } from '../support/spawn.js';
import { until } from '../support/poll.js';
import { startSecureInfra, type SecureInfra } from '../support/secure-servers.js';
import { expectNoDuplicates } from '../support/unique.js';
import { sdkPoolAcls } from '../support/kafka.js';
import { TEST_VERIFY_KEY, testSigner } from '../support/signing.js';

/** A KafkaJS instance with the same TLS and SASL: the test acts as an administrator and as an attacker, outside idmint's ports. */
const asKafkaJs = (o: KafkaConnectionOptions) => createKafka({ brokers: o.brokers, clientId: o.clientId ?? 'secure-test', config: kafkaJsConfig(o) });

/**
 * Secured connections, end to end: idmint against Kafka (SASL_SSL, SCRAM-SHA-512), Redis (TLS,
 * ACL user), Postgres (TLS verify-full, scram) and ZooKeeper (digest ACLs) in the secured
 * profile of scripts/infra.sh. Right credentials serve IDs on every path without a duplicate;
 * each wrong credential or certificate stops the start with one line naming the server.
 */

let infra: SecureInfra;
const servers: SpawnedServer[] = [];
const dataDir = () => mkdtempSync(join(tmpdir(), 'idmint-secure-data-'));

beforeAll(async () => {
  infra = await startSecureInfra();
});

afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
  await infra?.close();
});

describe('secured connections', () => {
  it('with the right credentials every server is reached and IDs stay unique across two processes, HTTP and Kafka', async () => {
    for (let i = 0; i < 2; i++)
      servers.push(await spawnServer({ ...infra.env, IDMINT_DATA_DIR: dataDir(), IDMINT_PG_SCHEMA: 'secure', IDMINT_TAG_CACHE_MS: '100' }));
    for (const server of servers) {
      const report = await untilReady(server.url, { output: server.output });
      expect(report.status, JSON.stringify(report)).toBe('ready');
      expect(report.checks.snowflake?.message).toMatch(/from zookeeper/);
      expect(report.checks.redis?.ok).toBe(true);
      expect(report.checks.kafka?.ok).toBe(true);
    }
    const created = await fetch(`${servers[0]!.url}/v1/biz`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ bizTag: 'secured', step: 100 }),
    });
    expect(created.status).toBe(201);
    // The other process has cached the tag's absence for its IDMINT_TAG_CACHE_MS.
    await until('the second process to see the new tag', async () => (await fetch(`${servers[1]!.url}/v1/ids/secured?count=1`)).status === 200);

    const ids: string[] = [];
    const take = async (server: SpawnedServer, path: string) => {
      const response = await fetch(`${server.url}${path}`);
      expect(response.status).toBe(200);
      const body = (await response.json()) as { ids?: string[]; blocks?: { start: string; end: string }[] };
      for (const id of body.ids ?? []) ids.push(id);
      for (const b of body.blocks ?? []) for (let v = BigInt(b.start); v <= BigInt(b.end); v++) ids.push(String(v));
    };
    const calls: Promise<void>[] = [];
    for (let i = 0; i < 200; i++) {
      const server = servers[i % 2]!;
      calls.push(take(server, i % 3 === 0 ? '/v1/blocks/secured?count=40' : '/v1/ids/secured?count=20'));
    }
    const config = loadConfig({ ...infra.env });
    const client = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka: kafkaFor(config, 'secure-test', silentLogger), clientId: 'secure-test' });
    try {
      const viaKafka = await Promise.all(Array.from({ length: 20 }, () => client.getIds('secured', 10, { timeoutMs: 20_000 })));
      for (const batch of viaKafka) ids.push(...batch);
    } finally {
      await client.close();
    }
    await Promise.all(calls);
    // Snowflake IDs from both processes' ZooKeeper worker ids.
    for (let i = 0; i < 50; i++) {
      const response = await fetch(`${servers[i % 2]!.url}/api/snowflake/get/secured`);
      expect(response.status).toBe(200);
      ids.push(await response.text());
    }
    expect(ids.length).toBe(Math.ceil(200 / 3) * 40 + (200 - Math.ceil(200 / 3)) * 20 + 200 + 50);
    expectNoDuplicates(ids);
  });

  it("Kafka ACLs: an SDK principal reads its tag's pool topic but cannot write to it (nor forge blocks there)", async () => {
    const config = loadConfig({ ...infra.env });
    const admin = kafkaFor(config, 'acl-admin', silentLogger);
    const sink = new KafkaPoolSink({ signer: testSigner, kafka: admin, partitions: 2 });
    const bizTag = 'aclpool';
    const client = loadConfig({ ...infra.env, IDMINT_KAFKA_SASL_USERNAME: 'idmint-client' });
    const grants = sdkPoolAcls('idmint-client');
    const kafkaAdmin = asKafkaJs(admin).admin();
    await kafkaAdmin.connect();
    const sdk = new IdmintClient({
      transport: kafkaPoolTransport({ verifyKey: TEST_VERIFY_KEY, kafka: kafkaFor(client, 'acl-sdk', silentLogger), takeTimeoutMs: 10_000 }),
      timeoutMs: 60_000,
    });
    const producer = asKafkaJs(kafkaFor(client, 'acl-forger', silentLogger)).producer();
    try {
      await kafkaAdmin.createAcls({ acl: grants });
      // The refill (idmint, a super user) fills the topic.
      await sink.push({ bizTag, shard: 0, start: 1, end: 1000 });
      const ids = await sdk.nextMany(bizTag, 100);
      expect(ids).toHaveLength(100);
      expectNoDuplicates(ids);
      // The same principal producing a block of its choosing is refused by the broker.
      await producer.connect();
      const forged = await producer.send({ topic: poolTopic(bizTag), messages: [{ value: encodePoolBlock(bizTag, 1, 5) }] }).then(
        () => 'accepted',
        (err: { type?: string; message: string }) => err.type ?? err.message,
      );
      expect(forged).toBe('TOPIC_AUTHORIZATION_FAILED');
    } finally {
      await producer.disconnect().catch(() => undefined);
      await sdk.close();
      await sink.deleteTopics(bizTag).catch(() => undefined);
      await sink.close();
      await kafkaAdmin.disconnect();
    }
  });

  it('the servers refuse plaintext and password-less clients', async () => {
    const { DATABASE_URL, REDIS_URL } = infra.env as Record<string, string>;
    const plain = new URL(DATABASE_URL!);
    plain.search = '?sslmode=disable';
    const pgClient = new pg.Client({ connectionString: plain.toString() });
    await expect(pgClient.connect()).rejects.toThrow(/no encryption|pg_hba/);
    await pgClient.end().catch(() => undefined);

    const anonymous = new URL(REDIS_URL!);
    anonymous.username = '';
    anonymous.password = '';
    const redis = new Redis(anonymous.toString(), {
      tls: { ca: infra.env.IDMINT_REDIS_TLS_CA ? (await import('node:fs')).readFileSync(infra.env.IDMINT_REDIS_TLS_CA, 'utf8') : undefined },
      lazyConnect: true,
      retryStrategy: () => null,
      maxRetriesPerRequest: 0,
    });
    let reason = '';
    redis.on('error', (err: Error) => (reason = err.message));
    await redis.connect().catch(() => undefined);
    await redis.ping().catch((err: Error) => (reason ||= err.message));
    expect(reason).toMatch(/NOAUTH|NOPERM|WRONGPASS|disabled/i);
    redis.disconnect();
  });

  it("ZooKeeper: another client can read idmint's worker nodes but cannot rewrite or delete them", async () => {
    const client = zookeeper.createClient(infra.env.ZK_CONNECT!);
    const call = <T>(fn: (cb: (err: Error | null, value: T) => void) => void) =>
      new Promise<{ err: Error | null; value: T }>((resolve) => fn((err, value) => resolve({ err, value })));
    await new Promise<void>((resolve) => {
      client.once('connected', () => resolve());
      client.connect();
    });
    try {
      // The worker-id records (and the leases beside them) carry the ACL: readable, not writable. A
      // fresh deployment keeps them under its own root, /idmint/deployments/<id>/snowflake.
      const { value: deployments } = await call<string[]>((cb) => client.getChildren('/idmint/deployments', (err, c) => cb(err, c)));
      expect(deployments).toHaveLength(1);
      const root = `/idmint/deployments/${deployments[0]}/snowflake`;
      const workers = `${root}/workers`;
      const { value: children } = await call<string[]>((cb) => client.getChildren(workers, (err, c) => cb(err, c)));
      expect(children.length).toBeGreaterThanOrEqual(2);
      const node = `${workers}/${children[0]}`;
      expect((await call<unknown>((cb) => client.getData(node, (err, d) => cb(err, d)))).err).toBeNull();
      expect(String((await call<unknown>((cb) => client.setData(node, Buffer.from('{}'), -1, (err, s) => cb(err, s)))).err)).toMatch(/NO_AUTH/);
      expect(String((await call<unknown>((cb) => client.remove(node, -1, (err) => cb(err, undefined)))).err)).toMatch(/NO_AUTH/);
      const lease = `${root}/leases/${children[0]}`;
      expect(String((await call<unknown>((cb) => client.remove(lease, -1, (err) => cb(err, undefined)))).err)).toMatch(/NO_AUTH/);
      for (const dir of ['workers', 'leases']) {
        expect(String((await call<unknown>((cb) => client.create(`${root}/${dir}/intruder-`, null, 2, (err, p) => cb(err, p)))).err)).toMatch(/NO_AUTH/);
      }
    } finally {
      client.close();
    }
  });

  const wrong: [string, (env: Record<string, string>) => Record<string, string>, RegExp][] = [
    [
      'a wrong Redis password',
      (e) => ({ ...e, REDIS_URL: e.REDIS_URL!.replace(/:[^:@/]+@/, ':wrong-password@') }),
      /^idmint: CONFIG_INVALID: Redis at rediss:\/\/idmint:\*\*\*@.* refused idmint's credentials .*REDIS_URL$/,
    ],
    ['Redis without its CA', (e) => ({ ...e, IDMINT_REDIS_TLS_CA: '' }), /^idmint: CONFIG_INVALID: Redis at .*: TLS failed .*IDMINT_REDIS_TLS_CA$/],
    [
      'a wrong Postgres password',
      (e) => ({ ...e, DATABASE_URL: e.DATABASE_URL!.replace(/:[^:@/]+@/, ':wrong-password@') }),
      /^idmint: CONFIG_INVALID: Postgres at postgres:\/\/postgres:\*\*\*@.* refused idmint's credentials .*DATABASE_URL$/,
    ],
    [
      'Postgres without its CA',
      (e) => ({ ...e, DATABASE_URL: e.DATABASE_URL!.replace(/&sslrootcert=[^&]*/, '') }),
      /^idmint: CONFIG_INVALID: Postgres at .*: TLS failed .*DATABASE_URL$/,
    ],
    [
      'a wrong Kafka password',
      (e) => ({ ...e, IDMINT_KAFKA_SASL_PASSWORD: 'wrong-password' }),
      /^idmint: CONFIG_INVALID: Kafka at .* refused idmint's credentials .*_PASSWORD$/,
    ],
    [
      'Kafka without its CA',
      (e) => ({ ...e, IDMINT_KAFKA_TLS_CA: '', IDMINT_KAFKA_TLS: 'true' }),
      /^idmint: CONFIG_INVALID: Kafka at .*: TLS failed .*IDMINT_KAFKA_TLS_CA$/,
    ],
    [
      'wrong ZooKeeper credentials',
      (e) => ({ ...e, IDMINT_ZK_AUTH: 'idmint:wrong-password' }),
      /^idmint: WORKER_ID_UNAVAILABLE: ZooKeeper at ZK_CONNECT=.* not authorized \(NO_AUTH\).*IDMINT_ZK_AUTH$/,
    ],
  ];
  it.each(wrong)('%s stops the start with one line naming the server', async (_name, change, line) => {
    const env = change({ ...infra.env, IDMINT_DATA_DIR: dataDir(), IDMINT_PG_SCHEMA: 'secure', LOG_LEVEL: 'warn' });
    const { code, output } = await runUntilExit(env);
    expect(code, output).toBe(1);
    const lines = output.trim().split('\n');
    expect(
      lines.filter((l) => l.startsWith('idmint: ')),
      output,
    ).toHaveLength(1);
    expect(
      lines.find((l) => l.startsWith('idmint: ')),
      output,
    ).toMatch(line);
    expect(output).not.toMatch(/\n\s+at /); // no stack trace
    expect(output).not.toContain(infra.password); // secrets stay out of messages
  });
});
