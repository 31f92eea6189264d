import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { KafkaConfig } from 'kafkajs';
import { createKafka } from '../../src/kafka/kafkajs/client.js';
import { until, untilValue } from './poll.js';
import { makeTls } from './tls.js';
import { freePort } from './ports.js';
import { INFRA_LIB as LIB, javaLogFlags } from './infra-jars.js';

/**
 * Three Kafka brokers on loopback, private to one test file: KRaft nodes that are broker and
 * controller each (a quorum of three), formatted in a temp dir with the project's jars (.infra/lib/kafka-<version>,
 * fetched by `npm run infra:up`). Failure detection is tuned down (a lost broker is fenced after
 * 4 s, a stopped follower leaves the ISR after 5 s) so a test sees a failover in seconds.
 */
export interface KafkaCluster {
  /** KAFKA_BROKERS for idmint: every broker, comma-separated. */
  readonly brokers: string;
  readonly nodeIds: readonly number[];
  /** The node leading `topic`'s `partition` now. */
  leaderOf(topic: string, partition?: number): Promise<number>;
  /** The active controller: the KRaft quorum's leader, as the live nodes' quorum-state files name it. */
  controllerLeader(): Promise<number>;
  /** SIGKILLs a node (its broker and its controller vote). */
  kill(nodeId: number): Promise<void>;
  /** Starts a killed node again; resolves once the cluster counts it among its brokers. */
  start(nodeId: number): Promise<void>;
  /** Until every partition of every topic has all its replicas in sync (a restarted node caught up). */
  untilInSync(): Promise<void>;
  /** idmint's variables to reach it (TLS and SASL when started `secure`, else empty). */
  readonly env: Readonly<Record<string, string>>;
  /** KafkaJS's ssl and sasl settings for a client of it (empty when not secure). */
  readonly security: Pick<KafkaConfig, 'ssl' | 'sasl'>;
  /** With `securePassword`: a second SCRAM user, `idmint-client`, who is no super user (an SDK's principal: it gets what an ACL grants). */
  readonly clientSecurity: Pick<KafkaConfig, 'ssl' | 'sasl'>;
  pause(nodeId: number): void;
  resume(nodeId: number): void;
  close(): Promise<void>;
}

const run = promisify(execFile);

/**
 * A Kafka cluster id: 16 random bytes in URL-safe base64, as `kafka-storage random-uuid` prints.
 * Like Kafka's Uuid.randomUuid, one starting with '-' is drawn again: StorageTool's parser reads
 * `-t -x...` as an option (one start in 64 failed with "--cluster-id/-t: expected one argument").
 */
function clusterId(): string {
  for (;;) {
    const id = randomBytes(16).toString('base64url');
    if (!id.startsWith('-')) return id;
  }
}

/** Failure detection: how soon a silent broker is fenced, and a follower that stopped fetching leaves the ISR. */
export interface KafkaClusterTimings {
  brokerSessionTimeoutMs?: number;
  replicaLagTimeMaxMs?: number;
  /**
   * Clients and brokers on SASL_SSL (SCRAM-SHA-512, user `idmint` with this password), as the
   * secured profile of scripts/infra.sh: a throwaway CA and a certificate for 127.0.0.1 in the
   * cluster's dir. The controllers talk plaintext on loopback.
   */
  securePassword?: string;
}

export async function startKafkaCluster(size = 3, timings: KafkaClusterTimings = {}): Promise<KafkaCluster> {
  if (!existsSync(join(LIB, '.complete'))) throw new Error(`Kafka jars missing in ${LIB}: run \`npm run infra:up\` first`);
  const dir = mkdtempSync(join(tmpdir(), 'idmint-kafka-cluster-'));
  const nodeIds = Array.from({ length: size }, (_, i) => i + 1);
  const ports = new Map<number, { broker: number; controller: number }>();
  for (const id of nodeIds) ports.set(id, { broker: await freePort(), controller: await freePort() });
  const voters = nodeIds.map((id) => `${id}@127.0.0.1:${ports.get(id)!.controller}`).join(',');
  const brokers = nodeIds.map((id) => `127.0.0.1:${ports.get(id)!.broker}`).join(',');
  const password = timings.securePassword;
  const tls = join(dir, 'tls');
  if (password !== undefined) makeTls(tls);
  const listener = password === undefined ? 'PLAINTEXT' : 'SASL_SSL';
  const secureLines =
    password === undefined
      ? []
      : [
          'sasl.enabled.mechanisms=SCRAM-SHA-512',
          'sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512',
          `listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="idmint" password="${password}";`,
          'ssl.keystore.type=PEM',
          `ssl.keystore.location=${join(tls, 'server-bundle.pem')}`,
          'ssl.truststore.type=PEM',
          `ssl.truststore.location=${join(tls, 'ca.pem')}`,
          // An authorizer, as in the secured profile: idmint is a super user, any other principal
          // gets what an ACL grants; the controller listener is internal (ANONYMOUS on loopback).
          'authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer',
          'super.users=User:idmint;User:ANONYMOUS',
        ];
  const security: Pick<KafkaConfig, 'ssl' | 'sasl'> =
    password === undefined
      ? {}
      : { ssl: { ca: [readFileSync(join(tls, 'ca.pem'), 'utf8')] }, sasl: { mechanism: 'scram-sha-512', username: 'idmint', password } };
  const clientPassword = `${password}-client`;
  const clientSecurity: Pick<KafkaConfig, 'ssl' | 'sasl'> =
    password === undefined
      ? {}
      : { ssl: { ca: [readFileSync(join(tls, 'ca.pem'), 'utf8')] }, sasl: { mechanism: 'scram-sha-512', username: 'idmint-client', password: clientPassword } };
  const clusterEnv: Record<string, string> =
    password === undefined
      ? {}
      : {
          IDMINT_KAFKA_TLS_CA: join(tls, 'ca.pem'),
          IDMINT_KAFKA_SASL_MECHANISM: 'scram-sha-512',
          IDMINT_KAFKA_SASL_USERNAME: 'idmint',
          IDMINT_KAFKA_SASL_PASSWORD: password,
        };
  const replicas = Math.min(3, size);
  const conf = (id: number): string => join(dir, `node-${id}`, 'server.properties');
  const logFlags = javaLogFlags(dir, join(dir, 'kafka.log'));
  for (const id of nodeIds) {
    const { broker, controller } = ports.get(id)!;
    mkdirSync(join(dir, `node-${id}`, 'data'), { recursive: true });
    writeFileSync(
      conf(id),
      [
        'process.roles=broker,controller',
        `node.id=${id}`,
        `controller.quorum.voters=${voters}`,
        `listeners=${listener}://127.0.0.1:${broker},CONTROLLER://127.0.0.1:${controller}`,
        `advertised.listeners=${listener}://127.0.0.1:${broker}`,
        `inter.broker.listener.name=${listener}`,
        'controller.listener.names=CONTROLLER',
        `listener.security.protocol.map=${listener}:${listener},CONTROLLER:PLAINTEXT`,
        ...secureLines,
        `log.dirs=${join(dir, `node-${id}`, 'data')}`,
        'num.network.threads=2',
        'num.io.threads=2',
        'num.partitions=1',
        `default.replication.factor=${replicas}`,
        `min.insync.replicas=${Math.max(1, replicas - 1)}`,
        'auto.create.topics.enable=false',
        'delete.topic.enable=true',
        'group.initial.rebalance.delay.ms=0',
        `offsets.topic.replication.factor=${replicas}`,
        'offsets.topic.num.partitions=4',
        `transaction.state.log.replication.factor=${replicas}`,
        `transaction.state.log.min.isr=${Math.max(1, replicas - 1)}`,
        'transaction.state.log.num.partitions=2',
        'broker.heartbeat.interval.ms=1000',
        `broker.session.timeout.ms=${timings.brokerSessionTimeoutMs ?? 4000}`,
        `replica.lag.time.max.ms=${timings.replicaLagTimeMaxMs ?? 5000}`,
        'log.segment.bytes=16777216',
        '',
      ].join('\n'),
    );
  }
  const id = clusterId();
  await Promise.all(
    nodeIds.map((n) =>
      run('java', [
        '-Xmx128m',
        '-XX:TieredStopAtLevel=1',
        ...logFlags,
        '-cp',
        `${LIB}/*`,
        'kafka.tools.StorageTool',
        'format',
        '-t',
        id,
        '-c',
        conf(n),
        ...(password === undefined
          ? []
          : [
              '--add-scram',
              `SCRAM-SHA-512=[name=idmint,password=${password}]`,
              '--add-scram',
              `SCRAM-SHA-512=[name=idmint-client,password=${clientPassword}]`,
            ]),
      ]),
    ),
  );

  const procs = new Map<number, ChildProcess>();
  const startNode = (n: number): void => {
    const child = spawn(
      'java',
      [
        '-Xmx256m',
        '-Xms64m',
        '-XX:+UseSerialGC',
        '-XX:TieredStopAtLevel=1',
        '-Djava.awt.headless=true',
        ...logFlags,
        '-cp',
        `${LIB}/*`,
        'kafka.Kafka',
        conf(n),
      ],
      { stdio: 'ignore' },
    );
    procs.set(n, child);
  };
  const admin = createKafka({
    brokers,
    clientId: 'kafka-cluster-test',
    config: { ...security, retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 500 } },
  }).admin();
  const live = async (): Promise<number[]> => {
    try {
      await admin.connect();
      return (await admin.describeCluster()).brokers.map((b) => b.nodeId).sort();
    } catch {
      return [];
    }
  };
  const cluster: KafkaCluster = {
    brokers,
    nodeIds,
    env: clusterEnv,
    security,
    clientSecurity,
    async leaderOf(topic, partition = 0) {
      return untilValue(
        `the leader of ${topic}/${partition}`,
        async () => {
          const meta = await admin.fetchTopicMetadata({ topics: [topic] }).catch(() => undefined);
          const leader = meta?.topics[0]?.partitions.find((p) => p.partitionId === partition)?.leader;
          return leader !== undefined && leader >= 0 && procs.has(leader) ? leader : undefined;
        },
        (leader) => leader !== undefined,
        { timeoutMs: 30_000 },
      ) as Promise<number>;
    },
    async controllerLeader() {
      return untilValue(
        'the KRaft quorum leader',
        async () => {
          let best: { epoch: number; leader: number } | undefined;
          for (const n of procs.keys()) {
            try {
              const state = JSON.parse(readFileSync(join(dir, `node-${n}`, 'data', '__cluster_metadata-0', 'quorum-state'), 'utf8')) as {
                leaderId?: number;
                leaderEpoch?: number;
              };
              if (state.leaderId !== undefined && state.leaderId >= 0 && procs.has(state.leaderId) && (!best || (state.leaderEpoch ?? 0) > best.epoch))
                best = { epoch: state.leaderEpoch ?? 0, leader: state.leaderId };
            } catch {
              // not written yet
            }
          }
          return best?.leader;
        },
        (leader) => leader !== undefined,
        { timeoutMs: 30_000 },
      ) as Promise<number>;
    },
    async kill(n) {
      const child = procs.get(n);
      procs.delete(n);
      if (!child || child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    },
    async start(n) {
      startNode(n);
      await until(`kafka node ${n} back in the cluster`, async () => (await live()).includes(n), { timeoutMs: 90_000 });
    },
    async untilInSync() {
      await until(
        'every replica in sync',
        async () => {
          const meta = await admin.fetchTopicMetadata().catch(() => undefined);
          return meta !== undefined && meta.topics.every((t) => t.partitions.every((p) => p.leader >= 0 && p.isr.length === p.replicas.length));
        },
        { timeoutMs: 90_000, intervalMs: 250 },
      );
    },
    pause: (n) => void procs.get(n)?.kill('SIGSTOP'),
    resume: (n) => void procs.get(n)?.kill('SIGCONT'),
    async close() {
      await admin.disconnect().catch(() => undefined);
      for (const n of [...procs.keys()]) {
        procs.get(n)?.kill('SIGCONT');
        await cluster.kill(n);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    for (const n of nodeIds) startNode(n);
    await until(`${size} Kafka brokers up`, async () => (await live()).length === size, {
      timeoutMs: 120_000,
      detail: () => `logs in ${join(dir, 'kafka.log')}`,
    });
  } catch (err) {
    // close() deletes the directory and its log: keep the log's last lines in the error (a start
    // that never came up in a chaos run left nothing to read).
    const log = (() => {
      try {
        return readFileSync(join(dir, 'kafka.log'), 'utf8').split('\n').slice(-40).join('\n');
      } catch {
        return '(no kafka.log)';
      }
    })();
    await cluster.close();
    throw new Error(`${(err as Error).message}\nlast lines of kafka.log:\n${log}`, { cause: err });
  }
  return cluster;
}
