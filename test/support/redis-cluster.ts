import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { untilValue } from './poll.js';
import { makeTls } from './tls.js';
import { freePort } from './ports.js';

const run = promisify(execFile);

/**
 * A six-node Redis Cluster on loopback (three primaries, one replica each; node timeout 1 s),
 * private to one test file: `redis-server --cluster-enabled yes` processes in a temp dir, no
 * persistence, joined by `redis-cli --cluster create`. `env` is what idmint needs to reach it.
 */
export interface RedisClusterSet {
  readonly nodes: string;
  readonly env: Readonly<Record<string, string>>;
  /** The port of the primary that owns `key`'s slot now. */
  ownerOf(key: string): Promise<number>;
  /** SIGKILLs the primary of `key`'s slot; resolves once another node owns the slot. */
  killOwner(key: string): Promise<{ from: number; to: number }>;
  /**
   * SIGSTOPs the primary of `key`'s slot; resolves once its replica was promoted. The old primary
   * still holds its data: `resume` brings it back, until the cluster turns it into a replica.
   */
  pauseOwner(key: string): Promise<{ from: number; to: number; resume(): void }>;
  /** The role a node reports (`master`, `slave`), or undefined when it does not answer. */
  roleOf(port: number): Promise<string | undefined>;
  /** Until every slot is served and each primary has an in-sync replica (one fault at a time waits for this). */
  untilHealthy(): Promise<void>;
  close(): Promise<void>;
}

async function askNode<T>(
  port: number,
  login: { password?: string | undefined; user?: string | undefined },
  ca: string | undefined,
  fn: (client: Redis) => Promise<T>,
): Promise<T | undefined> {
  const { password, user } = login;
  const client = new Redis({
    port,
    host: '127.0.0.1',
    ...(password === undefined ? {} : { password }),
    ...(user === undefined ? {} : { username: user }),
    ...(ca === undefined ? {} : { tls: { ca } }),
    lazyConnect: true,
    retryStrategy: () => null,
    maxRetriesPerRequest: 0,
    connectTimeout: 1000,
    commandTimeout: 1000,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await fn(client);
  } catch {
    return undefined;
  } finally {
    client.disconnect();
  }
}

/**
 * `password`: every node requires it (`requirepass`, and `masterauth` for its replica links);
 * with `user`, that ACL user with the password instead, the default user off (`masteruser`).
 * `tls`: clients, replication and the cluster bus on TLS only (a throwaway CA,
 * test/support/tls.ts); `env` then names the CA (IDMINT_REDIS_TLS_CA) for a `rediss:` REDIS_URL.
 */
export async function startRedisCluster(options: { password?: string; user?: string; tls?: boolean } = {}): Promise<RedisClusterSet> {
  const { password, user } = options;
  const auth =
    password === undefined
      ? []
      : user === undefined
        ? ['--requirepass', password, '--masterauth', password]
        : ['--user', 'default', 'off', '--user', user, 'on', `>${password}`, '~*', '&*', '+@all', '--masteruser', user, '--masterauth', password];
  const dir = mkdtempSync(join(tmpdir(), 'idmint-rcluster-'));
  const ca = options.tls ? makeTls(join(dir, 'tls')) : undefined;
  const ask = <T>(port: number, fn: (client: Redis) => Promise<T>): Promise<T | undefined> => askNode(port, { password, user }, ca, fn);
  const tlsFile = (name: string): string => join(dir, 'tls', name);
  const listen = (port: number): string[] =>
    ca === undefined
      ? ['--port', String(port)]
      : [
          '--port',
          '0',
          '--tls-port',
          String(port),
          '--tls-cluster',
          'yes',
          '--tls-replication',
          'yes',
          '--tls-cert-file',
          tlsFile('server.pem'),
          '--tls-key-file',
          tlsFile('server.key'),
          '--tls-ca-cert-file',
          tlsFile('ca.pem'),
          '--tls-auth-clients',
          'no',
        ];
  const procs = new Map<number, ChildProcess>();
  const ports = await Promise.all(Array.from({ length: 6 }, () => freePort()));
  // Each node's cluster bus on a port of its own choosing: Redis's default, port + 10000, is a port
  // nobody reserved (an outgoing connection may hold it, and the node then exits at start).
  const busPorts = await Promise.all(ports.map(() => freePort()));
  for (const [i, port] of ports.entries()) {
    const args = [...listen(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--dbfilename', `n${port}.rdb`];
    args.push(
      ...auth,
      '--cluster-enabled',
      'yes',
      '--cluster-port',
      String(busPorts[i]),
      '--cluster-config-file',
      `nodes-${port}.conf`,
      '--cluster-node-timeout',
      '1000',
    );
    procs.set(port, spawn('redis-server', args, { cwd: dir, stdio: 'ignore' }));
  }
  const live = (): number[] => [...procs.keys()];
  const slotOwner = async (slot: number): Promise<number | undefined> => {
    for (const port of live()) {
      const slots = await ask(port, async (c) => (await c.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number]]>);
      const range = slots?.find(([from, to]) => slot >= from && slot <= to);
      if (range) return Number(range[2][1]);
    }
    return undefined;
  };
  const slotOf = async (key: string): Promise<number> => {
    for (const port of live()) {
      const slot = await ask(port, async (c) => Number(await c.call('CLUSTER', 'KEYSLOT', key)));
      if (slot !== undefined) return slot;
    }
    throw new Error('no cluster node answers');
  };
  const roleOf = async (port: number): Promise<string | undefined> => (await ask(port, (c) => c.info('replication')))?.match(/role:(\w+)/)?.[1];
  const promoted = async (slot: number, from: number): Promise<number> =>
    untilValue(
      'the cluster to promote a replica',
      () => slotOwner(slot),
      (p) => p !== undefined && p !== from,
      { timeoutMs: 60_000, intervalMs: 200 },
    ) as Promise<number>;
  const set: RedisClusterSet = {
    nodes: ports.map((p) => `127.0.0.1:${p}`).join(','),
    env: {
      REDIS_CLUSTER_NODES: ports
        .slice(0, 3)
        .map((p) => `127.0.0.1:${p}`)
        .join(','),
      ...(ca === undefined ? {} : { IDMINT_REDIS_TLS_CA: tlsFile('ca.pem') }),
    },
    async ownerOf(key) {
      const slot = await slotOf(key);
      return untilValue(
        `the owner of slot ${slot}`,
        () => slotOwner(slot),
        (p) => p !== undefined,
        { timeoutMs: 30_000, intervalMs: 200 },
      ) as Promise<number>;
    },
    async killOwner(key) {
      const slot = await slotOf(key);
      const from = await set.ownerOf(key);
      procs.get(from)?.kill('SIGKILL');
      procs.delete(from);
      return { from, to: await promoted(slot, from) };
    },
    async pauseOwner(key) {
      const slot = await slotOf(key);
      const from = await set.ownerOf(key);
      const proc = procs.get(from);
      proc?.kill('SIGSTOP');
      try {
        return { from, to: await promoted(slot, from), resume: () => void proc?.kill('SIGCONT') };
      } catch (err) {
        proc?.kill('SIGCONT');
        throw err;
      }
    },
    roleOf,
    async untilHealthy() {
      await untilValue(
        'the cluster healthy: every slot served, each primary with an in-sync replica',
        async () => {
          const infos = await Promise.all(
            live().map(async (port) => ({
              port,
              cluster: await ask(port, (c) => c.call('CLUSTER', 'INFO') as Promise<string>),
              repl: await ask(port, (c) => c.info('replication')),
            })),
          );
          if (infos.some((i) => !i.cluster?.includes('cluster_state:ok'))) return false;
          const primaries = infos.filter((i) => i.repl?.includes('role:master') && !/cluster_slots_assigned:0\b/.test(i.cluster ?? ''));
          const synced = infos.filter((i) => i.repl?.includes('master_link_status:up')).length;
          return primaries.length === 3 && synced >= primaries.length;
        },
        (ok) => ok,
        { timeoutMs: 60_000, intervalMs: 250 },
      );
    },
    async close() {
      for (const proc of procs.values()) {
        proc.kill('SIGCONT');
        proc.kill('SIGKILL');
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await untilValue(
      'the cluster nodes answering',
      async () => (await Promise.all(ports.map((p) => ask(p, (c) => c.ping())))).every((r) => r === 'PONG'),
      (ok) => ok,
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    await run(
      'redis-cli',
      [
        ...(user === undefined ? [] : ['--user', user]),
        ...(password === undefined ? [] : ['--no-auth-warning', '-a', password]),
        ...(ca === undefined ? [] : ['--tls', '--cacert', tlsFile('ca.pem')]),
        '--cluster',
        'create',
        ...ports.map((p) => `127.0.0.1:${p}`),
        '--cluster-replicas',
        '1',
        '--cluster-yes',
      ],
      { timeout: 60_000 },
    );
    await set.untilHealthy();
  } catch (err) {
    await set.close();
    throw err;
  }
  return set;
}
