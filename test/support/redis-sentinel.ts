import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { untilValue } from './poll.js';
import { makeTls } from './tls.js';
import { freePort } from './ports.js';

/**
 * A Redis master, `replicas` replicas (default one) and three sentinels (quorum 2, down after 1 s)
 * on loopback, private to one test file: `redis-server` processes in a temp dir, no persistence.
 * `env` is what idmint needs to reach the master through Sentinel.
 */
export interface RedisSentinelSet {
  readonly name: string;
  readonly sentinels: string;
  readonly env: Readonly<Record<string, string>>;
  /** The port of the master the sentinels name now. */
  masterPort(): Promise<number>;
  /**
   * SIGKILLs the current master once a replica is promotable (the sentinels learn replicas from the
   * master's INFO, every 10 s: a master killed before that is never replaced); resolves once the
   * sentinels name another.
   */
  killMaster(): Promise<{ from: number; to: number }>;
  /**
   * SIGSTOPs the current master once a replica is promotable; resolves once the sentinels name another. The old master is still
   * a master holding its data: `resume` brings it back stale, until the sentinels demote it.
   */
  pauseMaster(): Promise<{ from: number; to: number; resume(): void }>;
  /**
   * Until the sentinels know a replica of the current master that is in sync (link up, not down
   * or disconnected): one a failover can promote. One fault at a time waits for this.
   */
  untilPromotable(): Promise<void>;
  /** SIGKILLs a replica of the current master; resolves with its port. */
  killReplica(): Promise<number>;
  /** The role a server reports (`master`, `slave`), or undefined when it does not answer. */
  roleOf(port: number): Promise<string | undefined>;
  close(): Promise<void>;
}

/**
 * `auth`: `password` on every data node (`requirepass`, `masterauth`, and the sentinels' `auth-pass`;
 * with `user`, for that ACL user instead, the default user off: `masteruser`, `auth-user`),
 * `sentinelPassword` on the sentinels themselves (`requirepass`); `tls`: data nodes, their
 * replication and the sentinels on TLS only (a throwaway CA, test/support/tls.ts). `env` then
 * carries them as idmint takes them (REDIS_URL's password and `rediss:` scheme, REDIS_SENTINEL_PASSWORD,
 * IDMINT_REDIS_TLS_CA).
 */
export async function startRedisSentinels(
  name = 'idmint-pools',
  replicas = 1,
  auth: { password?: string; user?: string; sentinelPassword?: string; tls?: boolean } = {},
): Promise<RedisSentinelSet> {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-sentinel-'));
  const ca = auth.tls ? makeTls(join(dir, 'tls')) : undefined;
  /** A server's listening settings as [name, value] pairs: its port, or (tls) its TLS port and files only. */
  const listening = (port: number): Array<[string, string]> =>
    ca === undefined
      ? [['port', String(port)]]
      : [
          ['port', '0'],
          ['tls-port', String(port)],
          ['tls-cert-file', join(dir, 'tls', 'server.pem')],
          ['tls-key-file', join(dir, 'tls', 'server.key')],
          ['tls-ca-cert-file', join(dir, 'tls', 'ca.pem')],
          ['tls-auth-clients', 'no'],
          ['tls-replication', 'yes'],
        ];
  const listen = (port: number): string[] => listening(port).flatMap(([k, v]) => [`--${k}`, v]);
  const clientTls = ca === undefined ? {} : { tls: { ca } };
  // With `user`: an ACL user with the password, the default user off (replicas and sentinels log in as that user).
  const dataAuth =
    auth.password === undefined
      ? []
      : auth.user === undefined
        ? ['--requirepass', auth.password, '--masterauth', auth.password]
        : [
            '--user',
            'default',
            'off',
            '--user',
            auth.user,
            'on',
            `>${auth.password}`,
            '~*',
            '&*',
            '+@all',
            '--masteruser',
            auth.user,
            '--masterauth',
            auth.password,
          ];
  const sentinelAuth = { ...(auth.sentinelPassword === undefined ? {} : { password: auth.sentinelPassword }), ...clientTls };
  const dataClientAuth = {
    ...(auth.password === undefined ? {} : { password: auth.password }),
    ...(auth.user === undefined ? {} : { username: auth.user }),
    ...clientTls,
  };
  const procs = new Map<number, ChildProcess>();
  const start = (port: number, args: string[]): void => {
    const child = spawn('redis-server', args, { cwd: dir, stdio: 'ignore' });
    procs.set(port, child);
  };
  const master = await freePort();
  const replicaPorts = await Promise.all(Array.from({ length: replicas }, () => freePort()));
  const sentinelPorts = await Promise.all([0, 1, 2].map(() => freePort()));
  const common = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir];
  start(master, [...listen(master), ...common, ...dataAuth, '--dbfilename', `m${master}.rdb`]);
  for (const replica of replicaPorts)
    start(replica, [...listen(replica), ...common, ...dataAuth, '--dbfilename', `r${replica}.rdb`, '--replicaof', '127.0.0.1', String(master)]);
  for (const port of sentinelPorts) {
    const conf = join(dir, `sentinel-${port}.conf`);
    writeFileSync(
      conf,
      [
        ...listening(port).map(([k, v]) => `${k} ${v}`),
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor ${name} 127.0.0.1 ${master} 2`,
        `sentinel down-after-milliseconds ${name} 1000`,
        `sentinel failover-timeout ${name} 5000`,
        `sentinel parallel-syncs ${name} 1`,
        ...(auth.password === undefined ? [] : [`sentinel auth-pass ${name} ${auth.password}`]),
        ...(auth.user === undefined ? [] : [`sentinel auth-user ${name} ${auth.user}`]),
        ...(auth.sentinelPassword === undefined ? [] : [`requirepass ${auth.sentinelPassword}`]),
        '',
      ].join('\n'),
    );
    start(port, [conf, '--sentinel']);
  }
  const sentinels = sentinelPorts.map((p) => `127.0.0.1:${p}`).join(',');
  const ask = async (): Promise<number | undefined> => {
    for (const port of sentinelPorts) {
      const client = new Redis({ port, host: '127.0.0.1', ...sentinelAuth, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
      client.on('error', () => undefined);
      try {
        await client.connect();
        const addr = (await client.call('SENTINEL', 'get-master-addr-by-name', name)) as [string, string] | null;
        if (addr) return Number(addr[1]);
      } catch {
        // this sentinel is not up yet: ask the next
      } finally {
        client.disconnect();
      }
    }
    return undefined;
  };
  const info = async (port: number): Promise<string | undefined> => {
    const client = new Redis({
      port,
      host: '127.0.0.1',
      ...dataClientAuth,
      lazyConnect: true,
      retryStrategy: () => null,
      maxRetriesPerRequest: 0,
      connectTimeout: 1000,
      commandTimeout: 1000,
    });
    client.on('error', () => undefined);
    try {
      await client.connect();
      return String(await client.info('replication'));
    } catch {
      return undefined;
    } finally {
      client.disconnect();
    }
  };
  const promoted = async (from: number): Promise<number> =>
    untilValue('the sentinels to promote a replica', ask, (p) => p !== undefined && p !== from, { timeoutMs: 60_000, intervalMs: 200 }) as Promise<number>;
  const masterPort = async (): Promise<number> =>
    untilValue('a master named by the sentinels', ask, (p) => p !== undefined, { timeoutMs: 30_000, intervalMs: 200 }) as Promise<number>;
  const set: RedisSentinelSet = {
    name,
    sentinels,
    env: {
      REDIS_SENTINELS: sentinels,
      REDIS_SENTINEL_NAME: name,
      ...(auth.password === undefined && ca === undefined
        ? {}
        : {
            REDIS_URL: `${ca === undefined ? 'redis' : 'rediss'}://${auth.password === undefined ? '' : `${auth.user ?? ''}:${auth.password}@`}sentinel-master:6379`,
          }),
      ...(ca === undefined ? {} : { IDMINT_REDIS_TLS_CA: join(dir, 'tls', 'ca.pem') }),
      ...(auth.sentinelPassword === undefined ? {} : { REDIS_SENTINEL_PASSWORD: auth.sentinelPassword }),
    },
    masterPort,
    async killMaster() {
      await set.untilPromotable();
      const from = await masterPort();
      const proc = procs.get(from);
      proc?.kill('SIGKILL');
      procs.delete(from);
      return { from, to: await promoted(from) };
    },
    async pauseMaster() {
      await set.untilPromotable();
      const from = await masterPort();
      const proc = procs.get(from);
      proc?.kill('SIGSTOP');
      return { from, to: await promoted(from), resume: () => void proc?.kill('SIGCONT') };
    },
    async untilPromotable() {
      await untilValue(
        'a replica the sentinels can promote',
        async () => {
          for (const port of sentinelPorts) {
            const client = new Redis({
              port,
              host: '127.0.0.1',
              ...sentinelAuth,
              lazyConnect: true,
              retryStrategy: () => null,
              maxRetriesPerRequest: 0,
              connectTimeout: 1000,
              commandTimeout: 1000,
            });
            client.on('error', () => undefined);
            try {
              await client.connect();
              const replicas = (await client.call('SENTINEL', 'REPLICAS', name)) as string[][];
              const fields = replicas.map((r) => Object.fromEntries(r.flatMap((v, i) => (i % 2 === 0 ? [[v, r[i + 1]]] : []))) as Record<string, string>);
              if (!fields.some((f) => f.flags === 'slave' && f['master-link-status'] === 'ok')) return false;
            } catch {
              return false;
            } finally {
              client.disconnect();
            }
          }
          return true;
        },
        (ok) => ok,
        { timeoutMs: 60_000, intervalMs: 250 },
      );
    },
    async killReplica() {
      const current = await masterPort();
      for (const [port, proc] of procs) {
        if (port === current || sentinelPorts.includes(port)) continue;
        if (!(await info(port))?.includes('role:slave')) continue;
        proc.kill('SIGKILL');
        procs.delete(port);
        return port;
      }
      throw new Error('no live replica to kill');
    },
    async roleOf(port) {
      return (await info(port))?.match(/role:(\w+)/)?.[1];
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
    await masterPort();
    // The replica in sync and known to the sentinels before anyone fails over to it.
    await untilValue(
      'the replicas in sync',
      async () => (await Promise.all(replicaPorts.map(async (port) => (await info(port))?.includes('master_link_status:up') ?? false))).every(Boolean),
      (ok) => ok,
      { timeoutMs: 30_000, intervalMs: 200 },
    );
  } catch (err) {
    await set.close();
    throw err;
  }
  return set;
}
