import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigResourceTypes } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafkaClient, type IdmintKafkaClient } from '../../src/client/kafka/rpc-client.js';
import { createKafka } from '../../src/kafka/kafkajs/client.js';
import { ensureTopics, underReplicated } from '../../src/kafka/topics.js';
import { poolTopic, REQUEST_TOPIC } from '../../src/kafka/names.js';
import { IdmintClient } from '../../src/client/client.js';
import { kafkaPoolTransport } from '../../src/client/kafka/transports.js';
import { encodePoolBlock } from '../../src/kafka/messages.js';
import { KafkaPoolSink } from '../../src/pool/kafka/sink.js';
import { startKafkaCluster, type KafkaCluster } from '../support/kafka-cluster.js';
import { sdkPoolAcls, topicAdmin } from '../support/kafka.js';
import { sleep, until, untilValue } from '../support/poll.js';
import { spawnServer, untilReady, type SpawnedServer } from '../support/spawn.js';
import { freshStore, type TestStore } from '../support/store.js';
import { expectNoDuplicates } from '../support/unique.js';
import { TEST_VERIFY_KEY, testSigner } from '../support/signing.js';

// Three brokers, topics replicated three ways with min.insync.replicas 2 and every producer on
// acks=-1: Kafka request/reply keeps serving through the loss of the broker leading the request
// topic, of the active controller, and through a broker hung
// for 20 s, with every ID collected and none repeated. Secured as in production: clients and
// brokers on SASL_SSL (TLS with SCRAM-SHA-512), idmint configured by its IDMINT_KAFKA_TLS_CA and
// IDMINT_KAFKA_SASL_* variables (the plaintext replicated cluster is kafka-pool-replicated's and
// the --topology ha chaos run's).
describe('Kafka request/reply on three brokers, a broker lost under load', () => {
  let cluster: KafkaCluster;
  let st: TestStore;
  let server: SpawnedServer;
  let dataDir: string;
  const clients: IdmintKafkaClient[] = [];

  beforeAll(async () => {
    cluster = await startKafkaCluster(3, { securePassword: 'krepl-scram-secret' });
    st = await freshStore('krepl');
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-krepl-'));
    server = await spawnServer(
      { ...cluster.env, DATABASE_URL: st.url, KAFKA_BROKERS: cluster.brokers, IDMINT_DATA_DIR: dataDir, IDMINT_ROLES: 'api,responder' },
      { timeoutMs: 120_000 },
    );
    await untilReady(server.url, { status: 'ready', timeoutMs: 120_000, output: server.output });
    expect(
      (await fetch(`${server.url}/v1/biz`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"bizTag":"krepl","step":500}' })).status,
    ).toBe(201);
  }, 300_000);

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    await server?.stop('SIGTERM');
    await st?.close();
    await cluster?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }, 120_000);

  it('creates its topics with three replicas and min.insync.replicas 2, and names a topic replicated less', async () => {
    const kafkaAdmin = createKafka({ brokers: cluster.brokers, clientId: 'krepl-admin', config: cluster.security });
    const admin = kafkaAdmin.admin();
    await admin.connect();
    try {
      const meta = await admin.fetchTopicMetadata({ topics: [REQUEST_TOPIC] });
      expect(meta.topics[0]!.partitions.every((p) => p.replicas.length === 3)).toBe(true);
      const configs = await admin.describeConfigs({
        includeSynonyms: false,
        resources: [{ type: ConfigResourceTypes.TOPIC, name: REQUEST_TOPIC, configNames: ['min.insync.replicas'] }],
      });
      expect(configs.resources[0]!.configEntries.find((e) => e.configName === 'min.insync.replicas')?.configValue).toBe('2');
      // A topic made by hand with one replica is found (the server logs such a topic at start).
      await admin.createTopics({ topics: [{ topic: 'idmint.ids.krepl-low', numPartitions: 1, replicationFactor: 1 }], waitForLeaders: false });
      // Each broker learns of a new topic a moment apart: ask until the one asked knows it.
      const found = await untilValue(
        'the hand-made topic in the metadata',
        () => underReplicated(topicAdmin(kafkaAdmin), [REQUEST_TOPIC, 'idmint.ids.krepl-low']).catch(() => undefined),
        (f) => f !== undefined,
        { timeoutMs: 20_000 },
      );
      expect(found).toEqual([{ topic: 'idmint.ids.krepl-low', replicas: 1, wanted: 3 }]);
      // A factor larger than the cluster is refused with the variable to change.
      await expect(ensureTopics(topicAdmin(kafkaAdmin), [{ topic: 'idmint.ids.krepl-big', numPartitions: 1 }], 4)).rejects.toThrow(
        /replication factor 4: the cluster has 3 brokers \(IDMINT_KAFKA_REPLICATION_FACTOR\)/,
      );
    } finally {
      await admin.disconnect();
    }
  }, 60_000);

  it('serves through the request topic leader SIGKILLed, the active controller SIGKILLed, and again after a broker SIGSTOPped for 20 s: 0 duplicates', async () => {
    for (let i = 0; i < 4; i++) {
      const logger = (await import('pino')).pino({ level: process.env.KREPL_LOG ?? 'silent' }) as never;
      const kafka = createKafka({ brokers: cluster.brokers, clientId: `krepl-${i}`, config: cluster.security, logger });
      const client = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, timeoutMs: 5000, retries: 3, logger });
      clients.push(client);
      // A start that fails is not kept (the client starts again on the next call), as an
      // application would retry it: a reply topic created a moment ago may not be served by all
      // three brokers yet.
      for (let attempt = 1; ; attempt++) {
        try {
          await client.start();
          break;
        } catch (err) {
          if (attempt >= 3) throw err;
        }
      }
    }
    const ids: string[] = [];
    const errors = new Map<string, number>();
    const served: number[] = [];
    let running = true;
    const loops = clients.map(async (client) => {
      while (running) {
        try {
          ids.push(...(await client.getIds('krepl', 20)));
          served.push(Date.now());
        } catch (err) {
          const code = (err as { code?: string }).code ?? (err as Error).message.slice(0, 60);
          errors.set(code, (errors.get(code) ?? 0) + 1);
          await sleep(100);
        }
      }
    });
    const servedSince = (t: number): number => served.filter((s) => s > t).length;
    try {
      await until('IDs flowing before the faults', () => ids.length > 2000, { timeoutMs: 60_000 });

      // The broker leading the request topic's first partition, SIGKILLed.
      const leader = await cluster.leaderOf(REQUEST_TOPIC, 0);
      const killedAt = Date.now();
      await cluster.kill(leader);
      await until('replies again after the leader was killed', () => servedSince(killedAt + 1000) > 20, {
        timeoutMs: 90_000,
        detail: () => JSON.stringify([...errors]),
      });
      const backAfterKill = served.find((s) => s > killedAt + 1000)! - killedAt;
      const newLeader = await cluster.leaderOf(REQUEST_TOPIC, 0);
      expect(newLeader).not.toBe(leader);
      const restartedAt = Date.now();
      await cluster.start(leader);
      await until('replies after the broker rejoined', () => servedSince(restartedAt) > 20, { timeoutMs: 60_000 });
      // One fault at a time: the next starts once the restarted node holds every replica again
      // (before that, losing a second node leaves partitions below min.insync.replicas).
      await cluster.untilInSync();

      // The active controller (the KRaft quorum's leader) SIGKILLed and restarted.
      {
        const node = await cluster.controllerLeader();
        const at = Date.now();
        await cluster.kill(node);
        await until(`replies with node ${node} killed`, () => servedSince(at + 1000) > 20, {
          timeoutMs: 90_000,
          detail: () => `${JSON.stringify([...errors])}\n${server.output().slice(-5000)}`,
        });
        // The quorum elected another controller (only a live node is counted).
        expect(await cluster.controllerLeader()).not.toBe(node);
        const back = Date.now();
        await cluster.start(node);
        await until(`replies after node ${node} rejoined`, () => servedSince(back) > 20, { timeoutMs: 60_000 });
        await cluster.untilInSync();
      }

      // A broker hung for 20 s (its port open, nothing answering), then resumed.
      const hung = await cluster.leaderOf(REQUEST_TOPIC, 1);
      const pausedAt = Date.now();
      cluster.pause(hung);
      await sleep(20_000);
      cluster.resume(hung);
      const resumedAt = Date.now();
      await until('replies after the hung broker resumed', () => servedSince(resumedAt) > 20, { timeoutMs: 60_000 });
      const whilePaused = served.filter((s) => s > pausedAt && s < pausedAt + 20_000);
      if (process.env.KREPL_LOG) {
        for (const line of server.output().split('\n')) {
          const t = Number(/"time":(\d+)/.exec(line)?.[1] ?? 0);
          if (t > pausedAt - 1000 && t < pausedAt + 25_000) console.info(`+${t - pausedAt} ${line.slice(0, 400)}`);
        }
        console.info(
          `first replies after the pause: ${served
            .filter((s) => s > pausedAt)
            .slice(0, 5)
            .map((s) => s - pausedAt)
            .join(', ')}`,
        );
      }
      const longestGap = Math.max(...[pausedAt, ...whilePaused, pausedAt + 20_000].map((s, i, all) => (i === 0 ? 0 : s - all[i - 1]!)));
      console.info(
        `kafka replicated: ${ids.length} IDs; back ${backAfterKill} ms after the leader's SIGKILL; ${whilePaused.length} replies while a broker hung 20 s (longest wait ${longestGap} ms); errors ${JSON.stringify([...errors])}`,
      );
      // Not asserted: how many replies a hung broker lets through depends on what it led (0 to
      // 1,387 in the 20 s over seven runs; docs/reliability.md). Asserted: serving comes back and
      // nothing repeats.
    } finally {
      running = false;
      await Promise.all(loops);
    }
    expect(ids.length).toBeGreaterThan(5000);
    expectNoDuplicates(ids, 'IDs over Kafka request/reply through broker faults');
  }, 400_000);

  it("an SDK principal with only the ACLs docs/client.md lists takes pool blocks through the pool topic leader's SIGKILL, and cannot write a block", async () => {
    await cluster.untilInSync();
    const kafka = createKafka({ brokers: cluster.brokers, clientId: 'krepl-refill', config: cluster.security });
    const admin = kafka.admin();
    await admin.connect();
    await admin.createAcls({ acl: sdkPoolAcls('idmint-client') });
    const bizTag = 'kreplacl';
    // The refill's side (idmint, a super user): a replicated pool topic.
    const sink = new KafkaPoolSink({ signer: testSigner, kafka, partitions: 2, replicationFactor: 3 });
    const client = (id: string) => createKafka({ brokers: cluster.brokers, clientId: id, config: cluster.clientSecurity });
    const sdk = new IdmintClient({
      transport: kafkaPoolTransport({ verifyKey: TEST_VERIFY_KEY, kafka: client('krepl-sdk'), takeTimeoutMs: 15_000 }),
      timeoutMs: 120_000,
    });
    const forger = client('krepl-forger').producer();
    const ids: bigint[] = [];
    let next = 1;
    const push = async (n: number) => {
      for (let i = 0; i < n; i++, next += 1000) await sink.push({ bizTag, shard: 0, start: next, end: next + 999 });
    };
    try {
      await push(4);
      ids.push(...(await sdk.nextMany(bizTag, 500)));
      const leader = await cluster.leaderOf(poolTopic(bizTag), 0);
      await cluster.kill(leader);
      // Refilled while the leader is down (a push may fail once while leadership moves; the refill would retry with a new segment).
      await until(
        'a push after the leader died',
        async () =>
          push(2).then(
            () => true,
            () => false,
          ),
        { timeoutMs: 60_000 },
      );
      while (ids.length < 4000) ids.push(...(await sdk.nextMany(bizTag, 250)));
      await cluster.start(leader);
      await cluster.untilInSync();
      await forger.connect();
      const forged = await forger.send({ topic: poolTopic(bizTag), messages: [{ value: encodePoolBlock(bizTag, 1, 5) }] }).then(
        () => 'accepted',
        (err: { type?: string; message: string }) => err.type ?? err.message,
      );
      expect(forged).toBe('TOPIC_AUTHORIZATION_FAILED');
      // Nor may it read what it was not granted (the request topic).
      const nosy = client('krepl-nosy').admin();
      await nosy.connect();
      const refused = await nosy.fetchTopicOffsets(REQUEST_TOPIC).then(
        () => 'read',
        (err: { type?: string; message: string }) => err.type ?? err.message,
      );
      await nosy.disconnect();
      expect(refused).not.toBe('read');
    } finally {
      await forger.disconnect().catch(() => undefined);
      await sdk.close();
      await sink.deleteTopics(bizTag).catch(() => undefined);
      await sink.close();
      await admin.disconnect();
    }
    expect(ids.length).toBeGreaterThanOrEqual(4000);
    expectNoDuplicates(ids.map(String), 'pool IDs taken by the SDK principal');
  }, 300_000);
});
