import { silentLogger, type Logger } from '../core/logger.js';
import { defaults, OptionsError, resolveOptions } from '../core/options.js';
import { systemClock, type Clock } from '../core/ports.js';
import type { LeasedWorkerIdLease, Monotonic } from './lease-holder.js';
import { LeasedWorkerIdProvider } from './leased-provider.js';
import { ZooKeeperRegistry } from './zookeeper-registry.js';

export interface ZooKeeperWorkerIdProviderOptions {
  /** ZK_CONNECT: `host:port[,host:port]`. */
  connect: string;
  /** This process's `ip:port` (IDMINT_ADVERTISE): its identity in the registry and the key of its local files. */
  address: string;
  /** Digest credentials `user:password` (IDMINT_ZK_AUTH); see ZkClientOptions.auth. */
  auth?: string;
  /** `auth` was generated for the deployment (see ZkClientOptions.authGenerated). */
  authGenerated?: boolean;
  /** Where Leaf's sequential nodes may be (ZooKeeperRegistryOptions.leafRoot); '' for none. Default: the root itself when it is Leaf's `/idmint/snowflake`, else none. */
  leafRoot?: string;
  /** Default `/idmint/snowflake`: records `<root>/workers/<id>`, leases `<root>/leases/<id>`, Leaf's `<root>/forever` read. */
  root?: string;
  /** Where the lease file and clock mark live. Default `./data`. */
  dataDir?: string;
  logger?: Logger;
  clock?: Clock;
  /** How often the holder writes `{ip, port, timestamp, markMs}` to its record (the renewal). Default 3000 ms (Leaf's report). */
  reportEveryMs?: number;
  /** Default 5000 ms. */
  connectTimeoutMs?: number;
  /** The lease: the session's timeout (ZooKeeper may negotiate it into its bounds). Default 10000 ms. */
  sessionTimeoutMs?: number;
  /** Pause between attempts while waiting for an id or re-taking one. Default 1000 ms. */
  retryEveryMs?: number;
  /** The id to prefer (a StatefulSet pod's ordinal); see LeasedWorkerIdOptions. */
  preferredWorkerId?: number;
  /** Default 60000 ms. */
  preferredWaitMs?: number;
  /** The holder stops issuing this long before its session could expire. Default 1000 ms. */
  stopMarginMs?: number;
  /** See LocalTimeMarkOptions. */
  markAheadMs?: number;
  maxStartWaitMs?: number;
  monotonic?: Monotonic;
}

/** Leaf's root, shared by every deployment of earlier versions on one ZooKeeper. */
export const LEAF_ROOT = '/idmint/snowflake';

export const ZOOKEEPER_WORKER_ID_DEFAULTS = defaults({
  root: LEAF_ROOT,
  dataDir: './data',
  reportEveryMs: 3000,
  connectTimeoutMs: 5000,
  sessionTimeoutMs: 10_000,
  retryEveryMs: 1000,
});

/** What `acquire` returns: `registered` is false while the lease is not held (for /readyz). */
export type ZooKeeperWorkerIdLease = LeasedWorkerIdLease;

/**
 * Worker ids leased in ZooKeeper: a record per id (`<root>/workers/<id>`: Leaf's
 * `{ip, port, timestamp}`, the mark and the holder) and an ephemeral lease (`<root>/leases/<id>`)
 * that lives as long as the holder's session. A start takes an id whose lease is gone (its own
 * address's first, so a restart keeps its id), waits past the id's mark, and reports every 3 s;
 * a holder stops issuing a second before its session could expire. See leased-provider.ts for why
 * no ID repeats, and zookeeper-registry.ts for Leaf's layout.
 */
export class ZooKeeperWorkerIdProvider extends LeasedWorkerIdProvider {
  readonly zookeeper: Readonly<ZooKeeperWorkerIdProviderOptions & typeof ZOOKEEPER_WORKER_ID_DEFAULTS>;

  constructor(options: ZooKeeperWorkerIdProviderOptions) {
    const merged = resolveOptions({ ...ZOOKEEPER_WORKER_ID_DEFAULTS }, options, (s) => {
      if (!/^[^\s/:#]+:\d{1,5}(#\d{1,3})?$/.test(s.address))
        throw new OptionsError('ZooKeeperWorkerIdProvider', 'address', `must be ip:port (or ip:port#process), got "${s.address}"`);
      if (!/^(\/[^/\s]+)+$/.test(s.root)) throw new OptionsError('ZooKeeperWorkerIdProvider', 'root', `must be an absolute ZooKeeper path, got "${s.root}"`);
    });
    const logger = merged.logger ?? silentLogger;
    const clock = merged.clock ?? systemClock;
    super(
      () =>
        new ZooKeeperRegistry({
          connect: merged.connect,
          auth: merged.auth,
          authGenerated: merged.authGenerated === true,
          root: merged.root,
          // '' (a deployment that never used Leaf's root) reads none.
          leafRoot: merged.leafRoot === undefined ? (merged.root === LEAF_ROOT ? LEAF_ROOT : undefined) : merged.leafRoot || undefined,
          address: merged.address,
          connectTimeoutMs: merged.connectTimeoutMs,
          sessionTimeoutMs: merged.sessionTimeoutMs,
          clock,
          logger,
        }),
      `zk-${merged.address}`,
      {
        identity: merged.address,
        dataDir: merged.dataDir,
        renewEveryMs: merged.reportEveryMs,
        retryEveryMs: merged.retryEveryMs,
        clock,
        logger,
        preferredWorkerId: merged.preferredWorkerId,
        preferredWaitMs: merged.preferredWaitMs,
        stopMarginMs: merged.stopMarginMs,
        markAheadMs: merged.markAheadMs,
        maxStartWaitMs: merged.maxStartWaitMs,
        monotonic: merged.monotonic,
      },
    );
    this.zookeeper = merged;
  }

  get foreverPath(): string {
    return `${this.zookeeper.root}/forever`;
  }

  get workersPath(): string {
    return `${this.zookeeper.root}/workers`;
  }

  get leasesPath(): string {
    return `${this.zookeeper.root}/leases`;
  }
}
