// The subset of node-zookeeper-client 1.1.x that idmint uses; the package ships no types.
declare module 'node-zookeeper-client' {
  import type { EventEmitter } from 'node:events';

  export interface Stat {
    readonly version: number;
    /** The ACL's version (setACL checks it). */
    readonly aversion: number;
    readonly ctime: Buffer;
    readonly mtime: Buffer;
    readonly numChildren: number;
  }

  export class Exception extends Error {
    static readonly OK: 0;
    static readonly CONNECTION_LOSS: -4;
    static readonly OPERATION_TIMEOUT: -7;
    static readonly NO_NODE: -101;
    static readonly NO_AUTH: -102;
    static readonly BAD_VERSION: -103;
    static readonly NODE_EXISTS: -110;
    static readonly SESSION_EXPIRED: -112;
    readonly code: number;
    readonly name: string;
    readonly path: string | undefined;
    getCode(): number;
    getName(): string;
    getPath(): string | undefined;
  }

  export interface State {
    readonly name: string;
    readonly code: number;
    getName(): string;
    getCode(): number;
  }

  export const State: {
    readonly DISCONNECTED: State;
    readonly SYNC_CONNECTED: State;
    readonly AUTH_FAILED: State;
    readonly CONNECTED_READ_ONLY: State;
    readonly SASL_AUTHENTICATED: State;
    readonly EXPIRED: State;
  };

  export const CreateMode: {
    readonly PERSISTENT: 0;
    readonly EPHEMERAL: 1;
    readonly PERSISTENT_SEQUENTIAL: 2;
    readonly EPHEMERAL_SEQUENTIAL: 3;
  };

  export class Id {
    constructor(scheme: string, id: string);
    readonly scheme: string;
    readonly id: string;
  }

  export class ACL {
    constructor(permission: number, id: Id);
    readonly permission: number;
    readonly id: Id;
    static readonly OPEN_ACL_UNSAFE: ACL[];
    static readonly CREATOR_ALL_ACL: ACL[];
    static readonly READ_ACL_UNSAFE: ACL[];
  }

  export const Permission: { readonly READ: 1; readonly WRITE: 2; readonly CREATE: 4; readonly DELETE: 8; readonly ADMIN: 16; readonly ALL: 31 };

  export interface Event {
    readonly type: number;
    readonly name: string;
    readonly path: string;
    getType(): number;
    getName(): string;
    getPath(): string;
  }

  export interface ClientOptions {
    /** ms; default 30000 */
    sessionTimeout?: number;
    /** ms between connection attempts; default 1000 */
    spinDelay?: number;
    /** retries per operation; default 0 */
    retries?: number;
    sessionId?: Buffer;
    sessionPassword?: Buffer;
  }

  type Watcher = (event: Event) => void;

  /** A multi: its operations commit together, through the leader. */
  export interface Transaction {
    check(path: string, version?: number): Transaction;
    commit(callback: (error: Exception | Error | null, results: unknown[]) => void): void;
  }

  export interface Client extends EventEmitter {
    transaction(): Transaction;
    connect(): void;
    close(): void;
    getState(): State;
    getSessionId(): Buffer;
    getSessionPassword(): Buffer;
    getSessionTimeout(): number;
    addAuthInfo(scheme: string, auth: Buffer): void;
    setACL(path: string, acls: ACL[], version: number, callback: (error: Exception | Error | null, stat: Stat) => void): void;
    getACL(path: string, callback: (error: Exception | Error | null, acls: ACL[], stat: Stat) => void): void;
    create(path: string, data: Buffer | null, acls: ACL[], mode: number, callback: (error: Exception | Error | null, path: string) => void): void;
    create(path: string, data: Buffer | null, mode: number, callback: (error: Exception | Error | null, path: string) => void): void;
    remove(path: string, version: number, callback: (error: Exception | Error | null) => void): void;
    setData(path: string, data: Buffer | null, version: number, callback: (error: Exception | Error | null, stat: Stat) => void): void;
    getData(path: string, callback: (error: Exception | Error | null, data: Buffer | undefined, stat: Stat) => void): void;
    getData(path: string, watcher: Watcher, callback: (error: Exception | Error | null, data: Buffer | undefined, stat: Stat) => void): void;
    exists(path: string, callback: (error: Exception | Error | null, stat: Stat | null) => void): void;
    getChildren(path: string, callback: (error: Exception | Error | null, children: string[], stat: Stat) => void): void;
    mkdirp(path: string, callback: (error: Exception | Error | null, path: string) => void): void;
    mkdirp(path: string, data: Buffer | null, acls: ACL[], mode: number, callback: (error: Exception | Error | null, path: string) => void): void;
    on(event: 'connected' | 'disconnected' | 'expired' | 'connectedReadOnly' | 'authenticationFailed', listener: () => void): this;
    on(event: 'state', listener: (state: State) => void): this;
    once(event: 'connected' | 'disconnected' | 'expired' | 'connectedReadOnly' | 'authenticationFailed', listener: () => void): this;
  }

  export function createClient(connectionString: string, options?: ClientOptions): Client;

  const zookeeper: {
    createClient: typeof createClient;
    CreateMode: typeof CreateMode;
    State: typeof State;
    Exception: typeof Exception;
    ACL: typeof ACL;
    Id: typeof Id;
    Permission: typeof Permission;
  };
  export default zookeeper;
}
