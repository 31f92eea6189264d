import type { Logger } from '../core/logger.js';
import type { Clock } from '../core/ports.js';
import { CreateMode, isZkError, ZkClient, ZkException } from '../zookeeper/client.js';
import type { RegistryListing, RenewOutcome, TakeOutcome, TakeRequest, WorkerIdRegistry } from './registry.js';

export interface ZooKeeperRegistryOptions {
  connect: string;
  auth?: string | undefined;
  /** `auth` was generated for the deployment (ZkClientOptions.authGenerated). */
  authGenerated?: boolean | undefined;
  /**
   * Where Leaf's sequential nodes live (`<leafRoot>/forever`: earlier versions', or Leaf's own),
   * when this deployment may have registered there: those ids stay reserved (adopted by their own
   * address), and the sequence is sealed past the layout. Shared with other deployments, so read
   * and sealed, never taken over. Absent for a deployment that never used it.
   */
  leafRoot?: string | undefined;
  /** `<root>/workers/<id>` (the record), `<root>/leases/<id>` (the lease), `<root>/forever` (Leaf's layout, read). */
  root: string;
  /** `ip:port` of this process: written into the record as Leaf's `{ip, port, timestamp}`. */
  address: string;
  connectTimeoutMs: number;
  /** The lease: a session this long (ZooKeeper may negotiate it into its own bounds; the negotiated value counts). */
  sessionTimeoutMs: number;
  clock: Clock;
  logger: Logger;
}

/** What `<root>/workers/<id>` holds: Leaf's fields, and the mark and holder of the lease protocol. */
export interface ZkWorkerRecord {
  ip: string;
  port: string;
  /** When the holder last wrote (Leaf's report). */
  timestamp: number;
  /** No ID under this id is stamped above it (leased-provider.ts). */
  markMs: number;
  holder: string | null;
  identity: string;
}

/**
 * A Leaf node's last report is a past time, not a bound: its process may have issued until its next
 * report (3 s) plus its local mark's lead (1 s). An adopted Leaf-layout id floors this far above it.
 */
export const LEGACY_REPORT_GRACE_MS = 5000;

/** Seal Leaf's sequence for layouts up to this many ids (each step is two writes). */
const MAX_SEAL = 65_536;

/**
 * The ZooKeeper registry: a persistent record per id and an ephemeral lease node per id, which
 * exists while its holder's session lives. The record is written only with its version (a
 * compare-and-set); the lease is the session. Ids registered in Leaf's layout (`forever/<ip:port>-<seq>`,
 * by Leaf or an earlier idmint) have no lease to prove them gone: they stay reserved, except that
 * the same `ip:port` adopts its own. Leaf's sequence is advanced past the layout's last id once,
 * so a process of an earlier version (or Leaf) sharing the root is refused instead of registering
 * an id a leased process holds.
 */
export class ZooKeeperRegistry implements WorkerIdRegistry {
  readonly kind = 'zookeeper';
  private zk: ZkClient | null = null;
  private opening: Promise<ZkClient> | null = null;
  private readonly versions = new Map<number, { version: number; markMs: number; identity: string }>();
  private readonly listeners: Array<() => void> = [];
  private legacy = new Map<number, string>();
  private sealedTo = -1;
  private closed = false;

  constructor(private readonly o: ZooKeeperRegistryOptions) {}

  get where(): string {
    return `ZooKeeper (ZK_CONNECT=${this.o.connect}) under ${this.o.root}`;
  }

  get workersPath(): string {
    return `${this.o.root}/workers`;
  }

  get leasesPath(): string {
    return `${this.o.root}/leases`;
  }

  get foreverPath(): string {
    return `${this.o.leafRoot ?? this.o.root}/forever`;
  }

  /** The session that holds the leases, for tests that expire it. */
  get client(): ZkClient | null {
    return this.zk;
  }

  leaseMs(): number {
    // node-zookeeper-client knows the negotiated timeout; ZkClient keeps its client private.
    const negotiated = (this.zk as unknown as { client?: { getSessionTimeout?(): number } } | null)?.client?.getSessionTimeout?.();
    return typeof negotiated === 'number' && negotiated > 0 ? negotiated : this.o.sessionTimeoutMs;
  }

  onLeaseLost(listener: () => void): void {
    this.listeners.push(listener);
  }

  async open(maxWorkerId: number): Promise<void> {
    const zk = await this.client_();
    if (this.sealedTo >= maxWorkerId) return;
    // The records and leases are the deployment's own (its root, its identity); Leaf's nodes, if
    // any, another path's.
    const [leases, forever] = await Promise.all([zk.exists(this.leasesPath), this.o.leafRoot === undefined ? null : zk.exists(this.foreverPath)]);
    if (!leases) await Promise.all([zk.mkdirp(this.workersPath), zk.mkdirp(this.leasesPath)]);
    if (this.o.leafRoot === undefined) {
      this.sealedTo = maxWorkerId;
      return;
    }
    // A sequential child's number is its parent's child version: past the layout, nothing to seal.
    // (node-zookeeper-client's Stat has `cversion`; the project's type declares only what it used so far.)
    if (forever && (forever as unknown as { cversion: number }).cversion > maxWorkerId) this.sealedTo = maxWorkerId;
    else {
      if (!forever) await zk.mkdirp(this.foreverPath, 'shared');
      await this.seal(zk, maxWorkerId);
    }
  }

  async list(maxWorkerId: number): Promise<RegistryListing> {
    const zk = await this.client_();
    const [leases, workers, forever] = await Promise.all([
      zk.getChildren(this.leasesPath),
      zk.getChildren(this.workersPath),
      this.o.leafRoot === undefined ? Promise.resolve([]) : zk.getChildren(this.foreverPath).catch(noNode([])),
    ]);
    const held = new Set(leases.map(Number).filter((id) => Number.isSafeInteger(id) && id <= maxWorkerId));
    const known = new Map<number, { identity: string; markMs?: number | undefined }>();
    const ids = workers.map(Number).filter((id) => Number.isSafeInteger(id) && id <= maxWorkerId);
    const records = await Promise.all(ids.map((id) => (held.has(id) ? null : this.read(zk, id).catch(() => null))));
    const reserved = new Set<number>();
    ids.forEach((id, i) => {
      // A record that cannot be read (no mark) is never used: its mark cannot be honoured.
      if (!held.has(id) && records[i] === null) reserved.add(id);
      known.set(id, { identity: records[i]?.record.identity ?? '', markMs: records[i]?.record.markMs });
    });
    this.legacy = new Map();
    for (const name of forever) {
      const cut = name.lastIndexOf('-');
      const address = name.slice(0, cut);
      const id = Number(name.slice(cut + 1));
      if (name.startsWith('.') || cut < 0 || !Number.isSafeInteger(id) || id > maxWorkerId) continue;
      if (address === this.o.address) {
        this.legacy.set(id, name);
        if (!known.has(id)) known.set(id, { identity: this.o.address });
      } else reserved.add(id);
    }
    return { held, known, reserved };
  }

  async take(request: TakeRequest): Promise<TakeOutcome> {
    const zk = await this.client_();
    const { workerId } = request;
    const recordPath = `${this.workersPath}/${workerId}`;
    if (!(await zk.exists(recordPath))) {
      const markMs = await this.legacyFloor(zk, workerId);
      await zk.create(recordPath, this.data({ markMs, holder: null, identity: '' }), CreateMode.PERSISTENT).catch(exists(undefined));
    }
    // The mark guards the id's timestamps: only the deployment's identity may change it (a record
    // left open, before credentials, is taken over; one of other credentials is refused: NO_AUTH
    // names IDMINT_ZK_AUTH).
    await zk.secure(recordPath);
    const leasePath = `${this.leasesPath}/${workerId}`;
    const leaseData = Buffer.from(JSON.stringify({ token: request.token, identity: request.identity, pid: process.pid }));
    let created = false;
    for (let attempt = 0; attempt < 3 && !created; attempt++) {
      try {
        await zk.create(leasePath, leaseData, CreateMode.EPHEMERAL);
        created = true;
        break;
      } catch (err) {
        if (!isZkError(err, ZkException.NODE_EXISTS)) throw err;
      }
      const current = await zk.getData(leasePath).catch(noNode(null));
      if (current === null) continue; // expired meanwhile
      const holder = parse<{ token?: string; identity?: string }>(current.data) ?? {};
      if (!holder.token || !request.successorOf.includes(holder.token))
        return { taken: false, heldBy: { identity: holder.identity ?? '', token: holder.token ?? '' } };
      // This data directory's earlier process, now dead: its lease goes now rather than at its session's end.
      await zk.remove(leasePath, current.stat.version).catch(noNode(undefined));
    }
    if (!created) return { taken: false };
    try {
      for (let attempt = 0; attempt < 5; attempt++) {
        const { record, version } = await this.read(zk, workerId);
        try {
          const stat = await zk.setData(recordPath, this.data({ markMs: record.markMs, holder: request.token, identity: request.identity }), version);
          this.versions.set(workerId, { version: stat.version, markMs: record.markMs, identity: request.identity });
          const legacyName = this.legacy.get(workerId);
          // Adopted: the record now carries the Leaf node's floor, so the reservation can go.
          if (legacyName) await zk.remove(`${this.foreverPath}/${legacyName}`).catch(() => undefined);
          return { taken: true, floorMs: record.markMs, guardMs: 0, previousHolder: record.holder };
        } catch (err) {
          if (!isZkError(err, ZkException.BAD_VERSION)) throw err;
          // The previous holder wrote in between (its session lapsed, it did not know yet): read again.
        }
      }
    } catch (err) {
      await zk.remove(leasePath).catch(() => undefined);
      if (err instanceof UnreadableRecord) return { taken: false };
      throw err;
    }
    await zk.remove(leasePath).catch(() => undefined);
    return { taken: false };
  }

  async renew(workerId: number, token: string, markMs: number): Promise<RenewOutcome> {
    const zk = this.live();
    const recordPath = `${this.workersPath}/${workerId}`;
    for (let attempt = 0; attempt < 2; attempt++) {
      const known = this.versions.get(workerId);
      if (!known) return 'lost';
      const mark = Math.max(markMs, known.markMs);
      try {
        const stat = await zk.setData(recordPath, this.data({ markMs: mark, holder: token, identity: known.identity }), known.version);
        this.versions.set(workerId, { ...known, version: stat.version, markMs: mark });
        return 'renewed';
      } catch (err) {
        if (isZkError(err, ZkException.NO_NODE)) return 'lost';
        if (!isZkError(err, ZkException.BAD_VERSION)) throw err;
      }
      // A write of ours that timed out may have landed: still ours if the record names us.
      const { record, version } = await this.read(zk, workerId);
      if (record.holder !== token) return 'lost';
      this.versions.set(workerId, { ...known, version, markMs: record.markMs });
    }
    return 'lost';
  }

  async release(workerId: number, token: string, finalMs: number): Promise<void> {
    const zk = this.live();
    // Disconnected, the calls would wait out their timeouts: the lease ends with the session instead.
    if (!zk.connected) throw new Error(`ZooKeeper (ZK_CONNECT=${this.o.connect}) is not connected`);
    const known = this.versions.get(workerId);
    this.versions.delete(workerId);
    if (known) {
      await zk
        .setData(`${this.workersPath}/${workerId}`, this.data({ markMs: finalMs, holder: token, identity: known.identity }), known.version)
        .catch(() => undefined);
    }
    const leasePath = `${this.leasesPath}/${workerId}`;
    const current = await zk.getData(leasePath).catch(noNode(null));
    if (current && parse<{ token?: string }>(current.data)?.token === token) await zk.remove(leasePath, current.stat.version).catch(noNode(undefined));
  }

  async close(): Promise<void> {
    this.closed = true;
    this.zk?.close();
    this.zk = null;
  }

  /** The open session, or a new one after an expiry (the leases of the old one are gone). */
  private client_(): Promise<ZkClient> {
    if (this.closed) return Promise.reject(new Error('the worker-id registry is closed'));
    if (this.zk) return Promise.resolve(this.zk);
    this.opening ??= ZkClient.connect({
      connect: this.o.connect,
      connectTimeoutMs: this.o.connectTimeoutMs,
      sessionTimeoutMs: this.o.sessionTimeoutMs,
      logger: this.o.logger,
      ...(this.o.auth ? { auth: this.o.auth, authGenerated: this.o.authGenerated === true } : {}),
    })
      .then((zk) => {
        if (this.closed) {
          zk.close();
          throw new Error('the worker-id registry is closed');
        }
        this.zk = zk;
        zk.once('expired', () => {
          if (this.zk !== zk) return;
          zk.close();
          this.zk = null;
          this.versions.clear();
          for (const listener of this.listeners) listener();
        });
        return zk;
      })
      .finally(() => (this.opening = null));
    return this.opening;
  }

  /** Renewals and releases only go through the session that made the lease. */
  private live(): ZkClient {
    if (!this.zk) throw new Error(`no ZooKeeper session holds the lease (ZK_CONNECT=${this.o.connect})`);
    return this.zk;
  }

  private async read(zk: ZkClient, workerId: number): Promise<{ record: ZkWorkerRecord; version: number }> {
    const { data, stat } = await zk.getData(`${this.workersPath}/${workerId}`);
    const record = parse<Partial<ZkWorkerRecord>>(data) ?? {};
    // A record that cannot be read refuses the id rather than guess its mark.
    if (typeof record.markMs !== 'number' || !Number.isFinite(record.markMs))
      throw new UnreadableRecord(`worker record ${this.workersPath}/${workerId} has no mark`);
    return { record: { ip: '', port: '', timestamp: 0, holder: null, identity: '', ...record } as ZkWorkerRecord, version: stat.version };
  }

  private data(fields: Pick<ZkWorkerRecord, 'markMs' | 'holder' | 'identity'>): Buffer {
    const [ip, port] = this.o.address.replace(/#\d+$/, '').split(':') as [string, string];
    return Buffer.from(JSON.stringify({ ip, port, timestamp: this.o.clock.now(), ...fields } satisfies ZkWorkerRecord));
  }

  /** For an id this address registered in Leaf's layout: its last report plus the grace; else 0. */
  private async legacyFloor(zk: ZkClient, workerId: number): Promise<number> {
    const name = this.legacy.get(workerId);
    if (!name) return 0;
    const node = await zk.getData(`${this.foreverPath}/${name}`).catch(noNode(null));
    const timestamp = parse<{ timestamp?: number }>(node?.data)?.timestamp;
    return (typeof timestamp === 'number' ? timestamp : this.o.clock.now()) + LEGACY_REPORT_GRACE_MS;
  }

  /**
   * Advances Leaf's sequence (the `forever` node's child version) past `maxWorkerId`: a later
   * sequential node there gets a number the layout refuses. Each created-and-removed node moves it by two.
   */
  private async seal(zk: ZkClient, maxWorkerId: number): Promise<void> {
    const step = async (): Promise<number> => {
      const path = await zk.create(`${this.foreverPath}/.seal-`, null, CreateMode.PERSISTENT_SEQUENTIAL);
      await zk.remove(path).catch(() => undefined);
      return Number(path.slice(path.lastIndexOf('-') + 1));
    };
    let seq = await step();
    if (seq <= maxWorkerId && maxWorkerId < MAX_SEAL) {
      this.o.logger.info(
        { root: this.o.root, from: seq, to: maxWorkerId + 1 },
        "advancing Leaf's worker sequence past the layout, so no earlier version can register an id a lease holds",
      );
      while (seq <= maxWorkerId) {
        const batch = Math.min(128, Math.ceil((maxWorkerId + 1 - seq) / 2));
        const seqs = await Promise.all(Array.from({ length: batch }, step));
        seq = Math.max(...seqs);
      }
    } else if (seq <= maxWorkerId) {
      this.o.logger.warn(
        { root: this.o.root, maxWorkerId },
        "Leaf's worker sequence is not sealed for layouts this wide: do not run earlier versions or Leaf on this root",
      );
    }
    this.sealedTo = maxWorkerId;
  }
}

/** A record without a readable mark: its id is refused, never guessed at. */
class UnreadableRecord extends Error {}

function parse<T>(data: Buffer | undefined | null): T | null {
  if (!data || data.length === 0) return null;
  try {
    return JSON.parse(data.toString('utf8')) as T;
  } catch {
    return null;
  }
}

function noNode<T>(value: T): (err: unknown) => T {
  return (err) => {
    if (isZkError(err, ZkException.NO_NODE)) return value;
    throw err;
  };
}

function exists<T>(value: T): (err: unknown) => T {
  return (err) => {
    if (isZkError(err, ZkException.NODE_EXISTS)) return value;
    throw err;
  };
}
