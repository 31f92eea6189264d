import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { until } from './poll.js';
import { freePort } from './ports.js';
import { INFRA_LIB as LIB, javaLogFlags } from './infra-jars.js';

/**
 * A ZooKeeper ensemble on loopback, private to one test file: `size` QuorumPeerMain processes in
 * a temp dir with the project's jars (.infra/lib/kafka-<version>, fetched by `npm run infra:up`). tickTime 500 ms,
 * so sessions may be as short as 1 s and as long as 10 s, and an election takes about a second.
 */
export interface ZkEnsemble {
  /** ZK_CONNECT for idmint: every server, comma-separated. */
  readonly connect: string;
  readonly ids: readonly number[];
  /** `leader`, `follower`, or undefined for a server down or not serving (no quorum). */
  mode(id: number): Promise<string | undefined>;
  /** The server leading now (waits for an election). */
  leader(): Promise<number>;
  kill(id: number): Promise<void>;
  /** Starts a killed server again; resolves once it serves (with a quorum). */
  start(id: number): Promise<void>;
  close(): Promise<void>;
}

/** A four-letter word's answer, or undefined when the server does not answer. */
function fourLetter(port: number, word: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    let out = '';
    socket.setTimeout(2000, () => socket.destroy());
    socket.on('connect', () => socket.write(word));
    socket.on('data', (d) => (out += d.toString()));
    socket.on('close', () => resolve(out || undefined));
    socket.on('error', () => resolve(undefined));
  });
}

export async function startZkEnsemble(size = 3): Promise<ZkEnsemble> {
  if (!existsSync(join(LIB, '.complete'))) throw new Error(`ZooKeeper jars missing in ${LIB}: run \`npm run infra:up\` first`);
  const dir = mkdtempSync(join(tmpdir(), 'idmint-zk-ensemble-'));
  const ids = Array.from({ length: size }, (_, i) => i + 1);
  const ports = new Map<number, { client: number; peer: number; election: number }>();
  for (const id of ids) ports.set(id, { client: await freePort(), peer: await freePort(), election: await freePort() });
  const servers = ids.map((id) => `server.${id}=127.0.0.1:${ports.get(id)!.peer}:${ports.get(id)!.election}`);
  const logFlags = javaLogFlags(dir, join(dir, 'zookeeper.log'));
  const cfg = (id: number): string => join(dir, `zk-${id}`, 'zoo.cfg');
  for (const id of ids) {
    const data = join(dir, `zk-${id}`, 'data');
    mkdirSync(data, { recursive: true });
    writeFileSync(join(data, 'myid'), `${id}\n`);
    writeFileSync(
      cfg(id),
      [
        'tickTime=500',
        'initLimit=20',
        'syncLimit=5',
        `dataDir=${data}`,
        `clientPort=${ports.get(id)!.client}`,
        'clientPortAddress=127.0.0.1',
        'maxClientCnxns=0',
        '4lw.commands.whitelist=*',
        'admin.enableServer=false',
        ...servers,
        '',
      ].join('\n'),
    );
  }
  const procs = new Map<number, ChildProcess>();
  const startServer = (id: number): void => {
    const child = spawn(
      'java',
      [
        '-Xmx96m',
        '-Xms32m',
        '-XX:+UseSerialGC',
        '-XX:TieredStopAtLevel=1',
        '-Djava.awt.headless=true',
        ...logFlags,
        '-Dzookeeper.admin.enableServer=false',
        '-cp',
        `${LIB}/*`,
        'org.apache.zookeeper.server.quorum.QuorumPeerMain',
        cfg(id),
      ],
      { stdio: 'ignore' },
    );
    procs.set(id, child);
  };
  const mode = async (id: number): Promise<string | undefined> => {
    if (!procs.has(id)) return undefined;
    const answer = await fourLetter(ports.get(id)!.client, 'srvr');
    return /^Mode: (\w+)/m.exec(answer ?? '')?.[1];
  };
  const ensemble: ZkEnsemble = {
    connect: ids.map((id) => `127.0.0.1:${ports.get(id)!.client}`).join(','),
    ids,
    mode,
    async leader() {
      let found: number | undefined;
      await until(
        'a ZooKeeper leader',
        async () => {
          for (const id of procs.keys()) if ((await mode(id)) === 'leader') found = id;
          return found !== undefined;
        },
        { timeoutMs: 60_000, detail: () => `logs in ${join(dir, 'zookeeper.log')}` },
      );
      return found!;
    },
    async kill(id) {
      const child = procs.get(id);
      procs.delete(id);
      if (!child || child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    },
    async start(id) {
      startServer(id);
      await until(`ZooKeeper server ${id} serving`, async () => ['leader', 'follower'].includes((await mode(id)) ?? ''), { timeoutMs: 60_000 });
    },
    async close() {
      for (const id of [...procs.keys()]) await ensemble.kill(id);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    for (const id of ids) startServer(id);
    await until(
      `${size} ZooKeeper servers in a quorum`,
      async () => {
        const modes = await Promise.all(ids.map(mode));
        return modes.every((m) => m === 'leader' || m === 'follower');
      },
      { timeoutMs: 90_000, detail: () => `logs in ${join(dir, 'zookeeper.log')}` },
    );
  } catch (err) {
    await ensemble.close();
    throw err;
  }
  return ensemble;
}
