import type { Logger } from '../core/logger.js';
import type { DispenserMetrics } from '../dispenser/metrics.js';
import { fenceStore, raiseCountersToFences, type SegmentFence } from '../fence/fence.js';
import type { PostgresBizStore } from '../store/biz-store.js';
import type { PgIdentity } from '../store/pg.js';
import type { Closers } from './closers.js';
import type { ZkCredential } from '../zookeeper/digest.js';
import { regionOf, type Config } from './config.js';

/** Whether this process fences its segments: Postgres (which can fail over) and ZooKeeper to hold the marks. */
export function fenceWanted(config: Pick<Config, 'IDMINT_SEGMENT_FENCE' | 'ZK_CONNECT' | 'DATABASE_URL'>): boolean {
  if (config.IDMINT_SEGMENT_FENCE === 'off' || !config.DATABASE_URL) return false;
  return config.ZK_CONNECT !== undefined;
}

/**
 * Where this deployment's marks live in ZooKeeper: `/idmint/fence` by default; a deployment in its
 * own Postgres schema, or a region other than 0, gets its own path, since deployments and regions
 * may share a ZooKeeper and their counters are not each other's. Region 0 keeps the path it had
 * as a single region, so its marks survive `idmint regions apply`.
 */
export function fenceRoot(config: Pick<Config, 'IDMINT_PG_SCHEMA' | 'IDMINT_REGIONS' | 'IDMINT_REGION' | 'IDMINT_REGION_STRIPE'>): string {
  const base = config.IDMINT_PG_SCHEMA ? `/idmint/schemas/${config.IDMINT_PG_SCHEMA}` : '/idmint';
  const region = regionOf(config)?.region ?? 0;
  return region > 0 ? `${base}/regions/${region}/fence` : `${base}/fence`;
}

export interface FencedStore {
  readonly store: PostgresBizStore;
  /** To call when the database reports a failover: every counter is raised to its mark before the next segment. */
  readonly onFailover: (from: PgIdentity, to: PgIdentity) => void;
  readonly fence: SegmentFence;
}

/**
 * The segment fence in ZooKeeper around the store (docs/reliability.md, "Postgres failover"): no
 * segment is handed out unless it starts above every segment handed out before, as recorded
 * outside Postgres. Loaded only by processes that use it.
 */
export async function openFencedStore(
  config: Config,
  store: PostgresBizStore,
  deps: { metrics: DispenserMetrics; logger: Logger; closers: Closers; zk: ZkCredential | undefined; root: string },
): Promise<FencedStore> {
  const { ZookeeperFence } = await import('../fence/zookeeper-fence.js');
  const log = deps.logger.child({ component: 'segment-fence' });
  // The deployment's credential: the marks are the deployment's identity's alone (never world-writable).
  const fence = new ZookeeperFence({
    connect: config.ZK_CONNECT!,
    root: deps.root,
    ...(deps.zk ? { auth: deps.zk.auth, authGenerated: deps.zk.generated } : {}),
    logger: deps.logger,
  });
  deps.closers.add('segment fence', () => fence.close());
  const fenced = fenceStore(store, fence, { logger: deps.logger, onRewind: (bizTag) => deps.metrics.rewinds.inc({ biz_tag: bizTag }) });
  const onFailover = (from: PgIdentity, to: PgIdentity): void => {
    // Each rewound counter is counted as it is raised: a deployment with many tags takes a while.
    raiseCountersToFences(fence, store, (r) => deps.metrics.rewinds.inc({ biz_tag: r.bizTag })).then(
      (rewound) => {
        const say = rewound.length > 0 ? log.error.bind(log) : log.warn.bind(log);
        say(
          { from, to, rewound },
          `after the Postgres failover every tag was checked against its fence: ${rewound.length} counter(s) had been rewound (commits lost) and were raised past the fence`,
        );
      },
      (err: unknown) =>
        log.warn({ err: (err as Error).message }, 'checking the tags against their fences after a failover failed; each allocation still checks its own'),
    );
  };
  log.info({ connect: config.ZK_CONNECT, root: deps.root }, 'segments are fenced in ZooKeeper: a Postgres failover that loses commits cannot repeat them');
  return { store: fenced, onFailover, fence };
}
