/**
 * The port a reclaiming worker-id provider talks to: a registry of worker ids, each with a lease
 * (who may issue under it now) and a mark (no ID under it was or will be stamped above the mark,
 * unless its holder raised the mark first). ZooKeeper, Postgres and Redis implement it; the
 * protocol on top of it, and why it never repeats an ID, is in leased-provider.ts.
 *
 * Every write that matters is a compare-and-set on the holder, done by the server in one step:
 * a take succeeds only while no live lease exists (or the lease is the caller's predecessor's),
 * and a renewal or release only while the record still names the caller as holder.
 */
export interface RegistryListing {
  /** Ids with a live lease. */
  readonly held: ReadonlySet<number>;
  /** Ids with a record (a mark), held or not, with the identity that last held them and the mark when the registry can tell cheaply. */
  readonly known: ReadonlyMap<number, { readonly identity: string; readonly markMs?: number | undefined }>;
  /** Ids the registry must not hand out (ZooKeeper: Leaf-style nodes without a lease). */
  readonly reserved: ReadonlySet<number>;
}

export interface TakeRequest {
  readonly workerId: number;
  /** The new holder's token: random per process start, so a takeover is always a new holder. */
  readonly token: string;
  /** Who the holder is, for operators and for the ordinal rule (`ip:port`, a pod's address). */
  readonly identity: string;
  /** A lease carrying one of these tokens may be taken over at once: this data directory's earlier processes, now dead. */
  readonly successorOf: readonly string[];
}

export type TakeOutcome =
  | {
      readonly taken: true;
      /** The id's mark before this take: the new holder issues nothing stamped at or below it. */
      readonly floorMs: number;
      /** A registry-wide floor after the registry may have lost writes (Redis restart, Postgres failover), else 0. */
      readonly guardMs: number;
      /** The token the record named before: one of `successorOf` when this is that process's successor. */
      readonly previousHolder: string | null;
    }
  | {
      readonly taken: false;
      /** Who holds the live lease, when the registry can tell. */
      readonly heldBy?: { readonly identity: string; readonly token: string } | undefined;
    };

/** The registry no longer names this holder: someone took the id over (or it was deleted). */
export type RenewOutcome = 'renewed' | 'lost';

export interface WorkerIdRegistry {
  /** `zookeeper`, `postgres`, `redis`: the lease's `provider`. */
  readonly kind: string;
  /** Where it lives, for messages (`ZK_CONNECT=…`, a key, a table). */
  readonly where: string;
  /**
   * How long a lease outlives the moment its last successful take or renewal was *sent*, at the
   * least: the holder stops issuing a margin before that. ZooKeeper: the negotiated session timeout.
   */
  leaseMs(): number;
  /** Connects; rejects when the server cannot be reached. Idempotent. */
  open(maxWorkerId: number): Promise<void>;
  list(maxWorkerId: number): Promise<RegistryListing>;
  take(request: TakeRequest): Promise<TakeOutcome>;
  /** Raises the mark to `markMs` (never lowers it) and extends the lease, if the record still names `token`. */
  renew(workerId: number, token: string, markMs: number): Promise<RenewOutcome>;
  /** Sets the mark to `finalMs` (the highest timestamp issued) and ends the lease, if the record still names `token`. */
  release(workerId: number, token: string, finalMs: number): Promise<void>;
  /**
   * Resolves once the lease can no longer be relied on although no renewal failed yet (ZooKeeper: the
   * session expired); the holder then stops at once and takes its id again. Optional.
   */
  onLeaseLost?(listener: () => void): void;
  close(): Promise<void>;
}
