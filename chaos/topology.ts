import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startKafkaCluster, type KafkaCluster } from '../test/support/kafka-cluster.js';
import { PgHa } from '../test/support/pg-ha.js';
import { startRedisSentinels, type RedisSentinelSet } from '../test/support/redis-sentinel.js';
import { startZkEnsemble, type ZkEnsemble } from '../test/support/zk-ensemble.js';
import { freePort, spawnServer, type SpawnedServer } from '../test/support/spawn.js';
import { startPrivateServer, type PrivateServer, type ServerName } from '../test/support/servers.js';
import { TEST_SIGNING_SECRET } from '../test/support/signing.js';

/**
 * The chaos topology on this machine: private Kafka, ZooKeeper, Redis and Postgres (their own
 * ports and directories, started by scripts/infra.sh, so faults never touch other servers), and
 * idmint as separate processes: 2 api, 2 responders, 2 refill workers. Each role keeps its
 * port and data directory across restarts, so it keeps its identity and worker id.
 *
 * `ha`: every server replicated, as in production: three Kafka brokers (topics replicated three
 * ways), a ZooKeeper ensemble of three, Redis as a master with two replicas under three
 * Sentinels, and Postgres as three nodes under Patroni on that ensemble (scripts/pg-ha.sh,
 * asynchronous replication) reached through a multi-host DATABASE_URL, with the segment fence.
 */

export type TopologyKind = 'single' | 'ha';

export type RoleName = 'api-1' | 'api-2' | 'responder-1' | 'responder-2' | 'refill-1' | 'refill-2';
export const ROLES: readonly RoleName[] = ['api-1', 'api-2', 'responder-1', 'responder-2', 'refill-1', 'refill-2'];

export interface Role {
  readonly name: RoleName;
  readonly port: number;
  readonly dataDir: string;
  server: SpawnedServer | undefined;
}

export class Topology {
  readonly servers: Map<ServerName, PrivateServer>;
  readonly roles = new Map<RoleName, Role>();
  readonly env: Record<string, string> = {};
  /** The servers' variables and tuning, without a region's own (what `beside` starts from). */
  private serverEnv: Record<string, string> = {};
  /** False for a region started `beside` another: the servers are the other's to stop. */
  private readonly ownsServers: boolean;
  /** The replicated servers of an `ha` topology. */
  pgHa: PgHa | undefined;
  kafkaCluster: KafkaCluster | undefined;
  zkEnsemble: ZkEnsemble | undefined;
  sentinels: RedisSentinelSet | undefined;

  private constructor(shared?: Topology) {
    this.servers = shared ? shared.servers : new Map();
    this.ownsServers = !shared;
    if (shared) {
      this.pgHa = shared.pgHa;
      this.kafkaCluster = shared.kafkaCluster;
      this.zkEnsemble = shared.zkEnsemble;
      this.sentinels = shared.sentinels;
      Object.assign(this.serverEnv, shared.serverEnv);
    }
  }

  /** `env`: a region's own variables (IDMINT_REGION, its schema, key prefix, queue, Kafka namespace). */
  static async start(log: (line: string) => void, kind: TopologyKind = 'single', env: Record<string, string> = {}): Promise<Topology> {
    const t = new Topology();
    try {
      if (kind === 'ha') {
        // Kafka's JVMs take longest: started with the others, in parallel.
        // Settled one by one, so close() stops whichever started when another did not.
        const settled = await Promise.allSettled([startKafkaCluster(3), startZkEnsemble(3), startRedisSentinels('idmint-chaos', 2)] as const);
        const [kafka, zk, redis] = settled;
        t.kafkaCluster = kafka.status === 'fulfilled' ? kafka.value : undefined;
        t.zkEnsemble = zk.status === 'fulfilled' ? zk.value : undefined;
        t.sentinels = redis.status === 'fulfilled' ? redis.value : undefined;
        const failed = settled.find((r) => r.status === 'rejected');
        if (failed) throw failed.reason;
        const [cluster, ensemble, sentinels] = [t.kafkaCluster!, t.zkEnsemble!, t.sentinels!];
        log(`servers up: kafka ${cluster.brokers}, zookeeper ${ensemble.connect}, redis sentinels ${sentinels.sentinels}`);
        // ttl 30: a crashed leader leaves the cluster without a writable primary for about 30 s.
        t.pgHa = await PgHa.start(ensemble.connect, { scope: `idmint-chaos-${process.pid}`, ttlSeconds: 30 });
        log(`Patroni cluster up: leader ${await t.pgHa.leader()}, ${t.pgHa.url}`);
        Object.assign(t.env, { ...sentinels.env, DATABASE_URL: t.pgHa.url, ZK_CONNECT: ensemble.connect, KAFKA_BROKERS: cluster.brokers });
      } else {
        const names: ServerName[] = ['redis', 'postgres', 'zookeeper', 'kafka'];
        const started = await Promise.all(names.map((n) => startPrivateServer(n)));
        names.forEach((n, i) => t.servers.set(n, started[i]!));
        log(`servers up: ${names.map((n) => `${n} ${t.servers.get(n)!.url}`).join(', ')}`);
        Object.assign(t.env, {
          REDIS_URL: t.server('redis').url,
          DATABASE_URL: t.server('postgres').url,
          ZK_CONNECT: t.server('zookeeper').url,
          KAFKA_BROKERS: t.server('kafka').url,
        });
      }
      Object.assign(t.env, {
        IDMINT_REFILL_EVERY_MS: '2000',
        IDMINT_POOL_SECONDS: '5',
        IDMINT_KAFKA_SESSION_TIMEOUT_MS: '6000',
        // Worker-id leases (and their ZooKeeper sessions) short enough that the expiry faults
        // (a frozen api process, a hung ZooKeeper) outlast them within a short run.
        IDMINT_WORKER_ID_LEASE_MS: '6000',
        IDMINT_KAFKA_PARTITIONS: '4',
        // Every role signs with the key the load's SDK readers verify with.
        IDMINT_SIGNING_KEY: TEST_SIGNING_SECRET,
        LOG_LEVEL: 'warn',
      });
      Object.assign(t.serverEnv, t.env);
      Object.assign(t.env, env);
      await t.startRoles(log);
      return t;
    } catch (err) {
      await t.close();
      throw err;
    }
  }

  /** Another region's six roles on `first`'s servers, with its own `env`. */
  static async beside(first: Topology, log: (line: string) => void, env: Record<string, string>): Promise<Topology> {
    const t = new Topology(first);
    Object.assign(t.env, t.serverEnv, env);
    try {
      await t.startRoles(log);
      return t;
    } catch (err) {
      await t.close();
      throw err;
    }
  }

  private async startRoles(log: (line: string) => void): Promise<void> {
    for (const name of ROLES)
      this.roles.set(name, { name, port: await freePort(), dataDir: mkdtempSync(join(tmpdir(), `idmint-chaos-${name}-`)), server: undefined });
    // The API first: it migrates the schema the others use.
    await this.startRole('api-1');
    await Promise.all(ROLES.filter((r) => r !== 'api-1').map((r) => this.startRole(r)));
    log(
      `roles up${this.env.IDMINT_REGION === undefined ? '' : ` in region ${this.env.IDMINT_REGION}`}: ${ROLES.map((r) => `${r} :${this.roles.get(r)!.port}`).join(', ')}`,
    );
  }

  server(name: ServerName): PrivateServer {
    return this.servers.get(name)!;
  }

  apiUrls(): string[] {
    return (['api-1', 'api-2'] as const).map((r) => `http://127.0.0.1:${this.roles.get(r)!.port}`);
  }

  /** Starts a role (again) and waits until it answers; retries while its servers are down. */
  async startRole(name: RoleName, deadlineMs = 120_000): Promise<void> {
    const role = this.roles.get(name)!;
    const kind = name.split('-')[0]!;
    const deadline = Date.now() + deadlineMs;
    for (;;) {
      try {
        role.server = await spawnServer(
          { ...this.env, IDMINT_ROLES: kind, IDMINT_PORT: String(role.port), IDMINT_DATA_DIR: role.dataDir, IDMINT_TEST_CLOCK_FILE: this.clockFile(name) },
          { timeoutMs: 60_000 },
        );
        return;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  }

  /** The role's test clock hook: milliseconds added to its clock (IDMINT_TEST_CLOCK_FILE). */
  clockFile(name: RoleName): string {
    return join(this.roles.get(name)!.dataDir, 'test-clock-offset-ms');
  }

  /** Steps a role's clock by `offsetMs` from real time (0: back to real time). */
  setClockOffset(name: RoleName, offsetMs: number): void {
    writeFileSync(this.clockFile(name), `${offsetMs}\n`);
  }

  /** SIGSTOP the role's process for `ms` (a long GC pause, a frozen VM: its sockets stay open), then SIGCONT. */
  async freezeRole(name: RoleName, ms: number): Promise<void> {
    const pid = this.roles.get(name)!.server?.child.pid;
    if (pid === undefined) throw new Error(`${name} is not running`);
    process.kill(pid, 'SIGSTOP');
    try {
      await new Promise((r) => setTimeout(r, ms));
    } finally {
      process.kill(pid, 'SIGCONT');
    }
  }

  /** Waits until the role's /readyz says `ready` (its sessions and leases back). */
  async untilRoleReady(name: RoleName, timeoutMs: number): Promise<void> {
    const url = `http://127.0.0.1:${this.roles.get(name)!.port}/readyz`;
    const deadline = Date.now() + timeoutMs;
    let last = '';
    while (Date.now() < deadline) {
      last = await fetch(url).then(
        (r) => r.text(),
        (err: unknown) => String(err),
      );
      if (/"status":"ready"/.test(last)) return;
      await new Promise((r) => setTimeout(r, 250));
    }
    throw new Error(`${name} not ready within ${timeoutMs} ms: ${last.slice(0, 300)}`);
  }

  /** SIGKILL, and wait for the exit. */
  async killRole(name: RoleName): Promise<void> {
    const role = this.roles.get(name)!;
    await role.server?.stop('SIGKILL');
    role.server = undefined;
  }

  async close(): Promise<void> {
    await Promise.all([...this.roles.values()].map((r) => r.server?.stop('SIGTERM').catch(() => undefined)));
    for (const r of this.roles.values()) rmSync(r.dataDir, { recursive: true, force: true });
    if (!this.ownsServers) return;
    await this.pgHa?.close();
    await Promise.all([this.kafkaCluster?.close(), this.zkEnsemble?.close(), this.sentinels?.close()].map((p) => p?.catch(() => undefined)));
    await Promise.all([...this.servers.values()].map((s) => s.close().catch(() => undefined)));
  }
}
