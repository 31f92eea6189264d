import { EventEmitter } from 'node:events';
import zookeeper from 'node-zookeeper-client';
import type { ACL, Client, ClientOptions, Stat } from 'node-zookeeper-client';
import { IdmintError, TimeoutError } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { checkInteger, defaults, OptionsError, resolveOptions } from '../core/options.js';
import { Episode } from '../core/episode.js';

export interface ZkClientOptions {
  /** `host:port[,host:port]`, as in ZK_CONNECT. */
  connect: string;
  /** How long `connect()` waits for the first session. Default 5000 ms. */
  connectTimeoutMs?: number;
  /** How long one operation may wait (operations queue while disconnected). Default 5000 ms. */
  operationTimeoutMs?: number;
  /** Requested session timeout. Default 10000 ms. */
  sessionTimeoutMs?: number;
  /** Pause between connection attempts. Default 500 ms. */
  spinDelayMs?: number;
  /**
   * Digest credentials `user:password` (IDMINT_ZK_AUTH): nodes this client creates get an ACL
   * that lets only this identity change or delete them (anyone may read).
   */
  auth?: string;
  /** `auth` was generated for this deployment (not an operator's IDMINT_ZK_AUTH): parents other deployments share stay creatable by them. */
  authGenerated?: boolean;
  /** Joins an existing session instead of opening one (used by tests to expire a session). */
  session?: { id: Buffer; password: Buffer };
  logger?: Logger;
}

export const ZK_CLIENT_DEFAULTS = defaults({
  connectTimeoutMs: 5000,
  operationTimeoutMs: 5000,
  sessionTimeoutMs: 10_000,
  spinDelayMs: 500,
});

export const CreateMode = zookeeper.CreateMode;
export const ZkException = zookeeper.Exception;

/** True when ZooKeeper refused a call for this client's identity (the node is another's). */
export function isNoAuth(err: unknown): boolean {
  return err instanceof IdmintError && err.details.zk === 'NO_AUTH';
}

/** True when `err` is a ZooKeeper exception with the given code (e.g. `ZkException.NO_NODE`). */
export function isZkError(err: unknown, code: number): boolean {
  return (
    typeof err === 'object' && err !== null && typeof (err as { getCode?: unknown }).getCode === 'function' && (err as { getCode(): number }).getCode() === code
  );
}

/**
 * Whether a failure means ZooKeeper is not there (no session, no answer in time, the connection
 * dropped), as opposed to an answer (a version conflict, a missing node, NO_AUTH).
 */
export function isZkOutage(err: unknown): boolean {
  if (err instanceof TimeoutError) return true;
  if ([ZkException.CONNECTION_LOSS, ZkException.SESSION_EXPIRED, ZkException.OPERATION_TIMEOUT].some((code) => isZkError(err, code))) return true;
  return err instanceof IdmintError && err.details.zkUnreachable === true;
}

/**
 * A promise wrapper over node-zookeeper-client: connect with a deadline, per-operation deadlines
 * (the library queues requests forever while disconnected), and `expired` / `disconnected` /
 * `connected` events. An expired session never comes back: the owner opens a new ZkClient.
 */
export class ZkClient extends EventEmitter {
  readonly options: Readonly<Required<Omit<ZkClientOptions, 'session' | 'logger' | 'auth' | 'authGenerated'>>>;
  private readonly client: Client;
  private readonly logger: Logger;
  /** The ACL of created nodes: open without credentials, else creator-only writes. */
  private readonly acls: ACL[];
  private readonly authenticated: boolean;
  private readonly sharedParents: boolean;
  private closed = false;

  private constructor(options: ZkClientOptions) {
    super();
    const { session: _session, logger: _logger, auth, authGenerated: _generated, ...rest } = options;
    this.options = resolveOptions({ ...ZK_CLIENT_DEFAULTS, connect: options.connect }, rest, (s) => {
      if (typeof s.connect !== 'string' || !/^[^\s,:]+:\d{1,5}(,[^\s,:]+:\d{1,5})*(\/\S*)?$/.test(s.connect)) {
        throw new OptionsError('ZooKeeper', 'connect', `(ZK_CONNECT) must be host:port[,host:port], got "${s.connect}"`);
      }
      for (const key of ['connectTimeoutMs', 'operationTimeoutMs', 'sessionTimeoutMs'] as const) checkInteger('ZooKeeper', s, key, 1);
      checkInteger('ZooKeeper', s, 'spinDelayMs', 0);
    });
    this.logger = (options.logger ?? silentLogger).child({ component: 'zookeeper' });
    const clientOptions: ClientOptions = { sessionTimeout: this.options.sessionTimeoutMs, spinDelay: this.options.spinDelayMs, retries: 0 };
    if (options.session) {
      clientOptions.sessionId = options.session.id;
      clientOptions.sessionPassword = options.session.password;
    }
    this.client = zookeeper.createClient(options.connect, clientOptions);
    if (auth) this.client.addAuthInfo('digest', Buffer.from(auth));
    this.acls = auth ? [...zookeeper.ACL.CREATOR_ALL_ACL, ...zookeeper.ACL.READ_ACL_UNSAFE] : zookeeper.ACL.OPEN_ACL_UNSAFE;
    this.authenticated = auth !== undefined;
    this.sharedParents = options.authGenerated === true;
    guardSocketParser(this.client, this.logger);
    guardHandshake(this.client, this.logger, handshakeTimeoutMs(this.options.sessionTimeoutMs));
    const lost = new Episode(this.logger, 'ZooKeeper connection lost; the client keeps retrying', { dependency: 'zookeeper' });
    this.client.on('connected', () => {
      lost.recover({ connect: this.options.connect });
      this.emit('connected');
    });
    this.client.on('disconnected', () => {
      if (!this.closed) lost.fail({ connect: this.options.connect }, 'disconnected');
      this.emit('disconnected');
    });
    this.client.on('expired', () => {
      this.logger.warn({ connect: this.options.connect }, 'ZooKeeper session expired');
      this.emit('expired');
    });
  }

  /** Opens a session or throws NOT_READY naming the connect string (the client is closed then). */
  static async connect(options: ZkClientOptions): Promise<ZkClient> {
    const zk = new ZkClient(options);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        zk.close();
        reject(
          new IdmintError('NOT_READY', `ZooKeeper at ZK_CONNECT=${zk.options.connect} did not accept a session within ${zk.options.connectTimeoutMs} ms`, {
            details: { connect: zk.options.connect, zkUnreachable: true, dependency: 'zookeeper' },
          }),
        );
      }, zk.options.connectTimeoutMs);
      zk.client.once('connected', () => {
        clearTimeout(timer);
        resolve();
      });
      zk.client.connect();
    });
    return zk;
  }

  get session(): { id: Buffer; password: Buffer } {
    return { id: this.client.getSessionId(), password: this.client.getSessionPassword() };
  }

  get connected(): boolean {
    return this.client.getState() === zookeeper.State.SYNC_CONNECTED;
  }

  /** Creates a node; returns the actual path (with the sequence suffix for sequential modes). */
  create(path: string, data: Buffer | null, mode: number = CreateMode.PERSISTENT): Promise<string> {
    return this.call(`create ${path}`, (cb) => this.client.create(path, data, this.acls, mode, (err, p) => cb(err, p)));
  }

  /**
   * Creates `path` and its missing parents as persistent nodes: this identity's (the default), or
   * `shared` for parents other deployments may share (`/idmint`, the worker root): see `sharedAcls`.
   */
  mkdirp(path: string, acl: 'own' | 'shared' = 'own'): Promise<string> {
    const acls = acl === 'shared' ? this.sharedAcls : this.acls;
    return this.call(`mkdirp ${path}`, (cb) => this.client.mkdirp(path, null, acls, CreateMode.PERSISTENT, (err, p) => cb(err, p)));
  }

  /**
   * The ACL of a parent other deployments may share. With credentials an operator gave
   * (IDMINT_ZK_AUTH, one per ZooKeeper), this identity's alone, as every node. With a credential
   * generated for one deployment, other deployments (with credentials of their own) must still
   * create their nodes under it: anyone may read and create children, only this identity may
   * change or delete (so no one else can delete a child: that needs DELETE on the parent).
   */
  private get sharedAcls(): ACL[] {
    if (!this.authenticated || !this.sharedParents) return this.acls;
    return [...zookeeper.ACL.CREATOR_ALL_ACL, new zookeeper.ACL(zookeeper.Permission.READ | zookeeper.Permission.CREATE, new zookeeper.Id('world', 'anyone'))];
  }

  getData(path: string): Promise<{ data: Buffer | undefined; stat: Stat }> {
    return this.call(`getData ${path}`, (cb) => this.client.getData(path, (err, data, stat) => cb(err, { data, stat })));
  }

  setData(path: string, data: Buffer, version = -1): Promise<Stat> {
    return this.call(`setData ${path}`, (cb) => this.client.setData(path, data, version, (err, stat) => cb(err, stat)));
  }

  /**
   * Passes when the node is still at `version`, through the leader (a one-check multi): unlike a
   * plain read, which a lagging server may answer, it orders after every write that completed.
   */
  checkVersion(path: string, version: number): Promise<void> {
    return this.call(`check ${path}`, (cb) =>
      this.client
        .transaction()
        .check(path, version)
        .commit((err) => cb(err, undefined)),
    );
  }

  /**
   * Takes a node that anyone may change (created before idmint had credentials, or by someone
   * else) for this client's identity: only it may then write or delete it, anyone may read.
   * Nothing to do without credentials, or when the world may only read already. False when the
   * node is gone.
   */
  async secure(path: string, acl: 'own' | 'shared' = 'own'): Promise<boolean> {
    if (!this.authenticated) return true;
    for (;;) {
      let found: { acls: ACL[]; stat: Stat };
      try {
        found = await this.call(`getACL ${path}`, (cb) => this.client.getACL(path, (err, acls, stat) => cb(err, { acls, stat })));
      } catch (err) {
        if (isZkError(err, ZkException.NO_NODE)) return false;
        throw err;
      }
      const allowed = acl === 'shared' && this.sharedParents ? zookeeper.Permission.READ | zookeeper.Permission.CREATE : zookeeper.Permission.READ;
      const open = found.acls.some((a) => a.id.scheme === 'world' && (a.permission & ~allowed) !== 0);
      if (!open) return true;
      const acls = acl === 'shared' ? this.sharedAcls : this.acls;
      try {
        await this.call(`setACL ${path}`, (cb) => this.client.setACL(path, acls, found.stat.aversion, (err, stat) => cb(err, stat)));
      } catch (err) {
        // Another process of the deployment took it first: read it again.
        if (isZkError(err, ZkException.BAD_VERSION)) continue;
        throw err;
      }
      this.logger.info(
        { path },
        'a world-writable idmint node in ZooKeeper now belongs to the deployment identity (IDMINT_ZK_AUTH or the generated credential)',
      );
      return true;
    }
  }

  /** `secure` for a path and each of its parents below `top` (e.g. the fence root and a tag's node). */
  async secureTree(path: string, top: string): Promise<void> {
    const parts = path.slice(top.length).split('/').filter(Boolean);
    let at = top;
    await this.secure(at);
    for (const part of parts) {
      at = `${at}/${part}`;
      await this.secure(at);
    }
  }

  /** The node's stat, or null when it does not exist. */
  exists(path: string): Promise<Stat | null> {
    return this.call(`exists ${path}`, (cb) => this.client.exists(path, (err, stat) => cb(err, stat)));
  }

  getChildren(path: string): Promise<string[]> {
    return this.call(`getChildren ${path}`, (cb) => this.client.getChildren(path, (err, children) => cb(err, children)));
  }

  remove(path: string, version = -1): Promise<void> {
    return this.call(`remove ${path}`, (cb) => this.client.remove(path, version, (err) => cb(err, undefined)));
  }

  /** Idempotent. Ends the session (ephemeral nodes go; idmint uses none). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.client.close();
  }

  private call<T>(what: string, run: (cb: (err: Error | null, value: T) => void) => void): Promise<T> {
    if (this.closed) return Promise.reject(new IdmintError('NOT_READY', `ZooKeeper ${what}: client is closed`, { details: { zkUnreachable: true } }));
    const timeoutMs = this.options.operationTimeoutMs;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new TimeoutError(`ZooKeeper ${what}`, timeoutMs, undefined, 'zookeeper')), timeoutMs);
      run((err, value) => {
        clearTimeout(timer);
        if (err && isZkError(err, ZkException.NO_AUTH)) {
          const message = `ZooKeeper at ZK_CONNECT=${this.options.connect} refused ${what}: not authorized (NO_AUTH); the node belongs to other credentials, check IDMINT_ZK_AUTH`;
          reject(new IdmintError('WORKER_ID_UNAVAILABLE', message, { cause: err, details: { connect: this.options.connect, zk: 'NO_AUTH' } }));
        } else if (err) reject(err);
        else resolve(value);
      });
    });
  }
}

interface ConnectionManagerInternals {
  onSocketData?: (this: ConnectionManagerInternals, buffer: Buffer) => void;
  onSocketConnected?: (this: ConnectionManagerInternals) => void;
  pendingBuffer?: Buffer | null;
  socket?: { destroy(): void; once(event: 'close', listener: () => void): unknown } | null;
  /** node-zookeeper-client's ConnectionManager state: 1 while connecting (its STATES.CONNECTING). */
  state?: number;
}

const CM_CONNECTING = 1;

/** How long a connection may take from TCP connect to the session's answer: a quarter of the session, 1 to 4 s. */
export function handshakeTimeoutMs(sessionTimeoutMs: number): number {
  return Math.min(4000, Math.max(1000, Math.floor(sessionTimeoutMs / 4)));
}

/**
 * node-zookeeper-client 1.1 clears its connect deadline when the TCP connection opens, then waits
 * for the server's answer to its ConnectRequest without any deadline. A ZooKeeper that accepts the
 * connection while starting (its port bound, the server not yet running) can leave a client
 * there for good: after a restart one API process's worker-id client never reconnected, and
 * issued no Snowflake IDs, until restarted. The Java client applies its connect timeout until the
 * session is established; this does the same: no answer within `timeoutMs`, the socket is dropped
 * and the client tries again (with the same session).
 */
function guardHandshake(client: Client, logger: Logger, timeoutMs: number): void {
  const cm = (client as unknown as { connectionManager?: ConnectionManagerInternals }).connectionManager;
  const original = cm?.onSocketConnected;
  if (!cm || typeof original !== 'function') return;
  cm.onSocketConnected = function guarded(): void {
    original.call(this);
    const socket = this.socket;
    if (!socket) return;
    const timer = setTimeout(() => {
      if (this.socket !== socket || this.state !== CM_CONNECTING) return;
      logger.debug({ timeoutMs }, 'ZooKeeper accepted the connection but did not answer the session request in time; reconnecting');
      socket.destroy();
    }, timeoutMs);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  };
}

/**
 * node-zookeeper-client 1.1 can mis-parse a reply and throw from its socket handler, which would
 * crash the process (alexguan/node-zookeeper-client#23, #70). Drop the connection instead: the
 * client reconnects with the same session and pending calls fail with CONNECTION_LOSS.
 */
function guardSocketParser(client: Client, logger: Logger): void {
  const cm = (client as unknown as { connectionManager?: ConnectionManagerInternals }).connectionManager;
  const original = cm?.onSocketData;
  if (!cm || typeof original !== 'function') return;
  // Bound when each socket is created (connect), so the instance property wins.
  cm.onSocketData = function guarded(buffer: Buffer): void {
    try {
      original.call(this, buffer);
    } catch (err) {
      logger.warn({ err }, 'ZooKeeper client could not parse a reply; dropping the connection to resync');
      this.pendingBuffer = null;
      this.socket?.destroy();
    }
  };
}
