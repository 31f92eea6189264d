import { IdmintError } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { defaults, OptionsError, resolveOptions } from '../core/options.js';
import { Circuit } from '../resilience/circuit.js';
import { CreateMode, isZkError, isZkOutage, ZkClient, ZkException, type ZkClientOptions } from '../zookeeper/client.js';
import type { SegmentFence } from './fence.js';

export interface ZookeeperFenceOptions extends Omit<ZkClientOptions, 'logger'> {
  /** Where the marks live: `<root>/<bizTag>/<shard>`, the decimal end as data. Default `/idmint/fence`. */
  root?: string;
  logger?: Logger;
  /** How often, while ZooKeeper is known to be unreachable, one probe looks for it. Default 1000 ms (the circuit's). */
  probeEveryMs?: number;
}

export const ZOOKEEPER_FENCE_DEFAULTS = defaults({ root: '/idmint/fence' });

/**
 * The segment fence in ZooKeeper: one persistent node per tag and shard holding the highest end
 * handed out, raised with a version check (never lowered, never deleted: a re-created tag keeps its
 * mark). Writes are quorum commits; `current` confirms its read through the leader, so a mark
 * raised by any process before the call is always seen.
 *
 * A circuit stands in front: once ZooKeeper is known to be unreachable (the session's connection
 * dropped, a call timed out), every call fails at once with NOT_READY, so a request that needs a
 * segment falls back (or answers 503 with Retry-After) without waiting; the client's reconnect or
 * a probe closes it.
 */
export class ZookeeperFence implements SegmentFence {
  private readonly made = new Set<string>();
  private readonly root: string;
  private readonly connectOptions: ZkClientOptions;
  /** The session, opened on first use and again after a failed connect or an expiry: ZooKeeper down never stops the process, only its segments. */
  private session: Promise<ZkClient> | undefined;
  private closed = false;
  private readonly circuit: Circuit;
  private live: ZkClient | undefined;

  constructor(options: ZookeeperFenceOptions) {
    const { logger, probeEveryMs, ...rest } = resolveOptions({ ...ZOOKEEPER_FENCE_DEFAULTS, logger: silentLogger }, options, (s) => {
      if (!/^(\/[^/\s]+)+\/*$/.test(s.root))
        throw new OptionsError('ZookeeperFence', 'root', `must be an absolute ZooKeeper path below / (default /idmint/fence), got "${s.root}"`);
    });
    const { root, ...zk } = rest;
    this.root = root.replace(/\/+$/, '');
    const log = logger.child({ component: 'segment-fence' });
    this.connectOptions = { ...zk, logger: log };
    this.circuit = new Circuit({
      name: `the segment fence (ZooKeeper at ZK_CONNECT=${zk.connect})`,
      isOutage: isZkOutage,
      dependency: 'zookeeper',
      probe: async () => (await this.client()).exists(this.root),
      logger: log,
      // A read, or a claim whose outcome is never learned: a gap at worst, never a duplicate.
      abandonOnOpen: true,
      probeEveryMs,
    });
  }

  /** For /readyz: whether segments can be claimed now. */
  health(): { ok: boolean; message?: string } {
    return this.circuit.health();
  }

  /** A fence whose session is open (for tests and tools that want a connection error at once). */
  static async open(options: ZookeeperFenceOptions): Promise<ZookeeperFence> {
    const fence = new ZookeeperFence(options);
    await fence.client();
    return fence;
  }

  current(bizTag: string, shard: number): Promise<number> {
    return this.circuit.run(() => this.read(bizTag, shard));
  }

  private async read(bizTag: string, shard: number): Promise<number> {
    const zk = await this.client();
    const path = await this.node(zk, bizTag, shard);
    for (;;) {
      const { data, stat } = await zk.getData(path);
      try {
        await zk.checkVersion(path, stat.version);
        return parseMark(data);
      } catch (err) {
        if (!isZkError(err, ZkException.BAD_VERSION)) throw err; // raised meanwhile: read again
      }
    }
  }

  async raise(bizTag: string, shard: number, end: number): Promise<void> {
    // A claim that stops at the mark's own end: written unless the mark is already there.
    await this.claim(bizTag, shard, end, end);
  }

  claim(bizTag: string, shard: number, start: number, end: number): Promise<boolean> {
    return this.circuit.run(() => this.claimOnce(bizTag, shard, start, end));
  }

  private async claimOnce(bizTag: string, shard: number, start: number, end: number): Promise<boolean> {
    const zk = await this.client();
    const path = await this.node(zk, bizTag, shard);
    for (;;) {
      const { data, stat } = await zk.getData(path);
      // The version check makes the read and the write one step: no raise lands in between.
      if (parseMark(data) >= start) return false;
      try {
        await zk.setData(path, Buffer.from(String(end)), stat.version);
        return true;
      } catch (err) {
        if (!isZkError(err, ZkException.BAD_VERSION)) throw err;
      }
    }
  }

  all(): Promise<Array<{ bizTag: string; shard: number; end: number }>> {
    return this.circuit.run(() => this.readAll());
  }

  private async readAll(): Promise<Array<{ bizTag: string; shard: number; end: number }>> {
    const zk = await this.client();
    if (!(await zk.exists(this.root))) return [];
    const marks: Array<{ bizTag: string; shard: number; end: number }> = [];
    for (const bizTag of await zk.getChildren(this.root)) {
      for (const shard of await zk.getChildren(`${this.root}/${bizTag}`)) {
        const { data } = await zk.getData(`${this.root}/${bizTag}/${shard}`);
        marks.push({ bizTag, shard: Number(shard), end: parseMark(data) });
      }
    }
    return marks;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.circuit.shutdown();
    const session = this.session;
    this.session = undefined;
    (await session?.catch(() => undefined))?.close();
  }

  private client(): Promise<ZkClient> {
    if (this.closed) return Promise.reject(new IdmintError('NOT_READY', 'the segment fence is closed'));
    this.session ??= ZkClient.connect(this.connectOptions).then(
      (zk) => {
        // The connection's own events are the first to know: no call waits out a timeout to learn it.
        // A closed (expired) session's late events say nothing about the current one.
        const current = (): boolean => this.live === zk;
        zk.on('disconnected', () => current() && this.circuit.trip('the ZooKeeper connection dropped'));
        zk.on('connected', () => current() && this.circuit.reset());
        zk.once('expired', () => {
          if (current()) {
            this.live = undefined;
            this.session = undefined;
          }
          zk.close();
        });
        this.live = zk;
        return zk;
      },
      (err: unknown) => {
        this.session = undefined; // the next segment tries again
        throw err;
      },
    );
    return this.session;
  }

  /**
   * The mark's node, created at 0 the first time this process meets the tag and shard. The root
   * and below belong to the deployment's identity (a node that anyone could set back, then a lossy
   * failover, would hand segments out twice); what is above the root may be shared with other
   * deployments (ZkClient's `shared` ACL).
   */
  private async node(zk: ZkClient, bizTag: string, shard: number): Promise<string> {
    const path = `${this.root}/${bizTag}/${shard}`;
    if (this.made.has(path)) return path;
    if (!(await zk.exists(path))) {
      const above = this.root.slice(0, this.root.lastIndexOf('/'));
      if (above !== '') await zk.mkdirp(above, 'shared');
      await zk.mkdirp(`${this.root}/${bizTag}`);
      try {
        await zk.create(path, Buffer.from('0'), CreateMode.PERSISTENT);
      } catch (err) {
        if (!isZkError(err, ZkException.NODE_EXISTS)) throw err;
      }
    }
    await zk.secureTree(path, this.root);
    this.made.add(path);
    return path;
  }
}

function parseMark(data: Buffer | undefined): number {
  const text = data?.toString() ?? '0';
  const n = Number(text);
  // A mark read as 0 would let a rewound counter through: refuse rather than guess.
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n))
    throw new IdmintError('NOT_READY', `a segment fence node holds "${text.slice(0, 40)}", not an ID; fix or remove it in ZooKeeper`);
  return n;
}
