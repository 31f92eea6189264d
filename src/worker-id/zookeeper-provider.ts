import { setTimeout as sleep } from 'node:timers/promises';
import { ClockBackwardsError, IdmintError } from '../core/errors.js';
import { systemClock, type Clock, type WorkerIdLease, type WorkerIdProvider } from '../core/ports.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { checkWorkerIdRange } from './lease.js';
import { defaults, OptionsError, resolveOptions } from '../core/options.js';
import { LocalTimeMark, localMarkPath, readLocalMark } from './local-time-mark.js';
import { CreateMode, isZkError, ZkClient, ZkException } from '../zookeeper/client.js';

export interface ZooKeeperWorkerIdProviderOptions {
  /** ZK_CONNECT: `host:port[,host:port]`. */
  connect: string;
  /** This process's `ip:port` (IDMINT_ADVERTISE); the node name and the key of its cached id. */
  address: string;
  /** Digest credentials `user:password` (IDMINT_ZK_AUTH); see ZkClientOptions.auth. */
  auth?: string;
  /** `auth` was generated for the deployment (see ZkClientOptions.authGenerated). */
  authGenerated?: boolean;
  /** Default `/idmint/snowflake` (Leaf's layout: `<root>/forever/<ip:port>-<seq>`). */
  root?: string;
  /** Where the cached id and clock mark live. Default `./data`. */
  dataDir?: string;
  logger?: Logger;
  clock?: Clock;
  /** How often `{ip, port, timestamp}` is written to the node. Default 3000 ms (Leaf's). */
  reportEveryMs?: number;
  /** Default 5000 ms. */
  connectTimeoutMs?: number;
  /** Default 10000 ms. */
  sessionTimeoutMs?: number;
  /** Pause between reconnect attempts after a session expiry. Default 1000 ms. */
  retryEveryMs?: number;
  /** See LocalTimeMarkOptions. */
  markAheadMs?: number;
  maxStartWaitMs?: number;
}

export const ZOOKEEPER_WORKER_ID_DEFAULTS = defaults({
  root: '/idmint/snowflake',
  dataDir: './data',
  reportEveryMs: 3000,
  connectTimeoutMs: 5000,
  sessionTimeoutMs: 10_000,
  retryEveryMs: 1000,
});

type Options = ZooKeeperWorkerIdProviderOptions & typeof ZOOKEEPER_WORKER_ID_DEFAULTS & { clock: Clock; logger: Logger };

/** What a worker writes to its node, as Leaf does. */
export interface ZkEndpoint {
  ip: string;
  port: string;
  timestamp: number;
}

/** What `acquire` returns: `registered` is false while the lease runs on its cached id (for /readyz). */
export interface ZooKeeperWorkerIdLease extends WorkerIdLease {
  readonly registered: boolean;
}

/**
 * Leaf's ZooKeeper worker ids: a persistent sequential node per `ip:port`, whose sequence number
 * is the worker id; a restarted process finds its node and reuses the number.
 */
export class ZooKeeperWorkerIdProvider implements WorkerIdProvider {
  readonly options: Readonly<Options>;
  private readonly baseLogger: Logger;

  constructor(options: ZooKeeperWorkerIdProviderOptions) {
    const merged = resolveOptions({ ...ZOOKEEPER_WORKER_ID_DEFAULTS, clock: systemClock, logger: silentLogger }, options, (s) => {
      if (!/^[^\s/:#]+:\d{1,5}(#\d{1,3})?$/.test(s.address)) throw new OptionsError('ZooKeeperWorkerIdProvider', 'address', `must be ip:port (or ip:port#process), got "${s.address}"`);
      if (!/^(\/[^/\s]+)+$/.test(s.root)) throw new OptionsError('ZooKeeperWorkerIdProvider', 'root', `must be an absolute ZooKeeper path, got "${s.root}"`);
    });
    // The ZooKeeper client names its own component; a child of ours would carry `component` twice.
    this.baseLogger = merged.logger;
    this.options = Object.freeze({ ...merged, logger: merged.logger.child({ component: 'worker-id-zookeeper' }) });
  }

  get foreverPath(): string {
    return `${this.options.root}/forever`;
  }

  get cachePath(): string {
    return localMarkPath(this.options.dataDir, this.cacheKey);
  }

  private get cacheKey(): string {
    return `zk-${this.options.address}`;
  }

  async acquire({ maxWorkerId }: { maxWorkerId: number }): Promise<ZooKeeperWorkerIdLease> {
    const o = this.options;
    const previous = readLocalMark(this.cachePath);
    let zk: ZkClient;
    try {
      zk = await this.connect();
    } catch (err) {
      if (!previous) {
        throw new IdmintError(
          'WORKER_ID_UNAVAILABLE',
          `ZooKeeper at ZK_CONNECT=${o.connect} is unreachable and there is no cached worker id in ${this.cachePath}; start ZooKeeper, or set IDMINT_WORKER_ID`,
          { cause: err, details: { connect: o.connect, cachePath: this.cachePath } },
        );
      }
      checkWorkerIdRange(previous.workerId, maxWorkerId, `the cached file ${this.cachePath}`);
      o.logger.warn({ connect: o.connect, workerId: previous.workerId, cachePath: this.cachePath, err }, 'ZooKeeper unreachable at start; using the cached worker id');
      const mark = await LocalTimeMark.start({ ...o, key: this.cacheKey, workerId: previous.workerId, source: 'zookeeper', previous });
      return new ZooKeeperLease(this, previous.workerId, null, null, mark);
    }
    try {
      const { workerId, nodePath } = await this.register(zk);
      checkWorkerIdRange(workerId, maxWorkerId, `ZooKeeper node ${nodePath}`);
      if (previous && previous.workerId !== workerId) o.logger.warn({ cached: previous.workerId, workerId }, 'ZooKeeper gave a different worker id than the cached one');
      const mark = await LocalTimeMark.start({ ...o, key: this.cacheKey, workerId, source: 'zookeeper', previous });
      const lease = new ZooKeeperLease(this, workerId, zk, nodePath, mark);
      // The first report must land: a node this identity may not write is refused here, at start.
      await lease.report(true);
      o.logger.info({ workerId, nodePath }, 'worker id registered in ZooKeeper');
      return lease;
    } catch (err) {
      zk.close();
      if (err instanceof IdmintError) throw err;
      throw new IdmintError('WORKER_ID_UNAVAILABLE', `ZooKeeper registration under ${o.root} failed: ${(err as Error).message}`, { cause: err, details: { connect: o.connect } });
    }
  }

  /** @internal */
  connect(): Promise<ZkClient> {
    const o = this.options;
    return ZkClient.connect({
      connect: o.connect,
      connectTimeoutMs: o.connectTimeoutMs,
      sessionTimeoutMs: o.sessionTimeoutMs,
      logger: this.baseLogger,
      ...(o.auth ? { auth: o.auth, authGenerated: o.authGenerated === true } : {}),
    });
  }

  /** Finds this address's node (checking its last report against the clock) or creates one. @internal */
  async register(zk: ZkClient): Promise<{ workerId: number; nodePath: string }> {
    const found = await this.findNode(zk);
    if (found) {
      const { data } = await zk.getData(found.nodePath);
      const last = parseEndpoint(data);
      const now = this.options.clock.now();
      if (last && now < last.timestamp) {
        throw new ClockBackwardsError(
          last.timestamp,
          now,
          `clock is ${last.timestamp - now} ms behind this worker's last report to ZooKeeper (${found.nodePath} reported ${iso(last.timestamp)}, now ${iso(now)}); refusing to start`,
        );
      }
      // Its time mark guards the worker's timestamps: only the deployment's identity may change it.
      await zk.secure(found.nodePath);
      return found;
    }
    // The worker root is shared by deployments and regions on one ZooKeeper (ZkClient's `shared` ACL).
    await zk.mkdirp(this.foreverPath, 'shared');
    await zk.secure(this.foreverPath, 'shared');
    const nodePath = await zk.create(`${this.foreverPath}/${this.options.address}-`, this.endpoint(), CreateMode.PERSISTENT_SEQUENTIAL);
    return { nodePath, workerId: parseSequence(nodePath) };
  }

  /** This address's node, or null. @internal */
  async findNode(zk: ZkClient): Promise<{ workerId: number; nodePath: string } | null> {
    let children: string[];
    try {
      children = await zk.getChildren(this.foreverPath);
    } catch (err) {
      if (isZkError(err, ZkException.NO_NODE)) return null;
      throw err;
    }
    // Two nodes for one address only arise from a race at first start; the lowest wins for everyone.
    const mine = children.filter((c) => c.slice(0, c.lastIndexOf('-')) === this.options.address).sort();
    const name = mine[0];
    return name === undefined ? null : { nodePath: `${this.foreverPath}/${name}`, workerId: parseSequence(name) };
  }

  /** @internal */
  endpoint(timestamp = this.options.clock.now()): Buffer {
    // `ip:port#n` is process n of an IDMINT_PROCESSES group on that port.
    const [ip, port] = this.options.address.replace(/#\d+$/, '').split(':') as [string, string];
    return Buffer.from(JSON.stringify({ ip, port, timestamp } satisfies ZkEndpoint));
  }
}

/**
 * Holds the node: reports every few seconds, and on session expiry reconnects and re-checks that
 * the node is still this address's with this number. Meanwhile it keeps serving: the local mark
 * alone guards timestamps. A node that vanished or changed revokes the lease.
 */
class ZooKeeperLease implements ZooKeeperWorkerIdLease {
  readonly provider = 'zookeeper';
  private zk: ZkClient | null;
  private nodePath: string | null;
  private lastReported = 0;
  private reporting = false;
  private revoked: IdmintError | null = null;
  private closed = false;
  private recovering: Promise<void> | null = null;
  private readonly stop = new AbortController();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly owner: ZooKeeperWorkerIdProvider,
    readonly workerId: number,
    zk: ZkClient | null,
    nodePath: string | null,
    private readonly mark: LocalTimeMark,
  ) {
    this.zk = zk;
    this.nodePath = nodePath;
    if (zk) this.watch(zk);
    else this.recover();
    this.timer = setInterval(() => void this.report().catch(() => undefined), owner.options.reportEveryMs);
    this.timer.unref();
  }

  /** True while a live session holds the node (for /readyz). */
  get registered(): boolean {
    return this.zk !== null && this.nodePath !== null && this.revoked === null;
  }

  /** For /readyz: IDs still flow on the local clock mark while ZooKeeper is away, but the operator should know. */
  health(): { ok: boolean; message?: string } {
    if (this.revoked) return { ok: false, message: this.revoked.message };
    if (!this.zk?.connected) return { ok: false, message: `ZooKeeper is unreachable; worker ${this.workerId} serves on its local clock mark` };
    return { ok: true };
  }

  assertIssuable(timestampMs: number): void {
    if (this.revoked) throw this.revoked;
    if (this.closed) throw new IdmintError('NOT_READY', `the ZooKeeper worker-id lease ${this.workerId} is closed`);
    this.mark.assertIssuable(timestampMs);
  }

  /** Writes `{ip, port, timestamp}` to the node; skipped while the clock is behind the last report. Failures are retried on the next tick, or thrown with `strict`. */
  async report(strict = false): Promise<void> {
    const { zk, nodePath } = this;
    // One report at a time: while disconnected a write can outlast the interval.
    if (!zk || !nodePath || this.closed || this.revoked || this.reporting) return;
    const now = this.owner.options.clock.now();
    if (now < this.lastReported) return;
    this.reporting = true;
    try {
      await zk.setData(nodePath, this.owner.endpoint(now));
      this.lastReported = now;
    } catch (err) {
      if (strict) throw err;
      this.owner.options.logger.debug({ err, nodePath }, 'ZooKeeper report failed; retrying on the next tick');
    } finally {
      this.reporting = false;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stop.abort();
    clearInterval(this.timer);
    this.zk?.close();
    this.zk = null;
    await this.recovering?.catch(() => undefined);
  }

  private watch(zk: ZkClient): void {
    zk.once('expired', () => {
      if (this.zk !== zk || this.closed) return;
      zk.close();
      this.zk = null;
      this.recover();
    });
  }

  private recover(): void {
    this.recovering ??= this.recoverLoop().finally(() => {
      this.recovering = null;
    });
  }

  private async recoverLoop(): Promise<void> {
    const { logger, retryEveryMs } = this.owner.options;
    while (!this.closed && !this.revoked) {
      let zk: ZkClient | null = null;
      try {
        zk = await this.owner.connect();
        const found = await this.owner.findNode(zk);
        if (this.closed) {
          zk.close();
          return;
        }
        if (!found || found.workerId !== this.workerId) {
          this.revoked = new IdmintError('WORKER_ID_UNAVAILABLE', `worker id ${this.workerId} is no longer this address's in ZooKeeper (found ${found ? found.nodePath : 'no node'}); restart to register again`, {
            details: { workerId: this.workerId, found: found?.nodePath ?? null },
          });
          logger.error({ workerId: this.workerId, found }, 'worker node changed or vanished in ZooKeeper; no more IDs from this lease');
          zk.close();
          return;
        }
        this.zk = zk;
        this.nodePath = found.nodePath;
        this.watch(zk);
        logger.info({ workerId: this.workerId, nodePath: found.nodePath }, 'ZooKeeper session re-established; worker node confirmed');
        await this.report();
        return;
      } catch (err) {
        zk?.close();
        logger.warn({ err }, 'ZooKeeper reconnect failed; serving on the local clock mark meanwhile');
        await sleep(retryEveryMs, undefined, { ref: false, signal: this.stop.signal }).catch(() => undefined);
      }
    }
  }
}

function parseSequence(pathOrName: string): number {
  const seq = pathOrName.slice(pathOrName.lastIndexOf('-') + 1);
  if (!/^\d+$/.test(seq)) throw new IdmintError('WORKER_ID_UNAVAILABLE', `unexpected ZooKeeper worker node name "${pathOrName}"`);
  return Number(seq);
}

function parseEndpoint(data: Buffer | undefined): ZkEndpoint | null {
  if (!data || data.length === 0) return null;
  try {
    const e = JSON.parse(data.toString('utf8')) as Partial<ZkEndpoint>;
    return typeof e.timestamp === 'number' ? (e as ZkEndpoint) : null;
  } catch {
    return null;
  }
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
