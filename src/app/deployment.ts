import { randomBytes, randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Registry } from 'prom-client';
import { NOT_SET, type DeploymentView } from '../core/deployment.js';
import { LEAF_LAYOUT, type Layout } from '../core/layout.js';
import type { Logger } from '../core/logger.js';
import type { ChangeFeed } from '../core/ports.js';
import { DeploymentWatch } from '../deployment/watch.js';
import type { Database } from '../store/db.js';
import { PostgresDeploymentRecord, regionValue } from '../store/deployment-record.js';
import { digestId, type ZkCredential } from '../zookeeper/digest.js';
import type { Closers } from './closers.js';
import { regionOf, type Config } from './config.js';
import { fenceRoot, fenceWanted } from './fence.js';
import { keyFingerprint } from './formats.js';
import { workerIdRegistryOf, ZK_WORKER_ROOT } from './worker-id.js';
import { ensureSigningKeys, openSigner, type Signer } from './signing.js';
import { parseSigningKey } from '../kafka/signing.js';

export interface Deployment {
  readonly watch: DeploymentWatch;
  /** The ZooKeeper credential every process of the deployment uses: IDMINT_ZK_AUTH, or the one generated into the record. */
  readonly zk: ZkCredential | undefined;
  /** Where the deployment's segment fence lives in ZooKeeper (as recorded), when this process fences. */
  readonly fenceRoot: string | undefined;
  /** Where the deployment's ZooKeeper worker ids live (as recorded), when this process takes one there. */
  readonly zkWorker: ZkWorkerPlace | undefined;
  /** What this process signs Kafka pool blocks and replies with, when it writes them (refill with Kafka, responder). */
  readonly signer: Signer | undefined;
}

/** How a layout is recorded: its name, bits and epoch. */
export function layoutValue(layout: Layout): string {
  return `${layout.name} ${layout.timeBits}.${layout.datacenterBits}.${layout.workerBits}.${layout.sequenceBits} ${layout.timeUnit} since ${layout.epoch.toISOString()}`;
}

/**
 * What a process with this config holds of the deployment-wide settings (src/core/deployment.ts).
 * `serving`: it issues IDs (a Snowflake worker, the layout, the region's worker bits, the key);
 * `zkAuth`: its ZooKeeper credential (null: it has none), when it uses ZooKeeper.
 */
export function deploymentView(
  config: Config,
  options: { serving: boolean; zkAuth?: string | null | undefined; fenceRoot?: string; zkWorker?: ZkWorkerPlace },
): DeploymentView {
  const view: DeploymentView = { 'segment-fence': fenceWanted(config) ? `zookeeper ${options.fenceRoot ?? fenceRoot(config)}` : 'off' };
  if (options.serving) {
    const registry = workerIdRegistryOf(config, { database: true });
    view['worker-id-registry'] = options.zkWorker && registry.startsWith('zookeeper') ? zkRegistryValue(options.zkWorker) : registry;
    view['snowflake-layout'] = layoutValue(LEAF_LAYOUT);
    const region = regionOf(config);
    view.region = region ? regionValue(region) : 'single';
  }
  // A serving process without the key cannot serve the deployment's obfuscated tags: it says so.
  if (config.IDMINT_OBFUSCATION_KEY) view['obfuscation-key-fingerprint'] = keyFingerprint(config.IDMINT_OBFUSCATION_KEY);
  else if (options.serving) view['obfuscation-key-fingerprint'] = NOT_SET;
  if (options.zkAuth !== undefined) view['zookeeper-identity'] = options.zkAuth ? `digest ${digestId(options.zkAuth)}` : NOT_SET;
  return view;
}

/**
 * This process's values of the deployment-wide settings (src/core/deployment.ts), the ZooKeeper
 * credential resolved on the way, and a watch that records what the deployment never held and
 * holds the process to the rest. `serving`: the process issues IDs (it has a Snowflake worker).
 */
export async function openDeployment(
  config: Config,
  db: Database,
  deps: {
    serving: boolean;
    signs: boolean;
    roles: readonly string[];
    address: string;
    changes?: ChangeFeed;
    registry: Registry;
    logger: Logger;
    closers: Closers;
  },
): Promise<Deployment> {
  const by = `${hostname()}:${process.pid}`;
  const record = new PostgresDeploymentRecord(db, by);
  const usesZooKeeper = fenceWanted(config) || (deps.serving && workerIdRegistryOf(config, { database: true }).startsWith('zookeeper'));
  const zk = usesZooKeeper ? await zooKeeperCredential(config, record) : undefined;
  const fence = fenceWanted(config) ? await fenceRootOf(config, record) : undefined;
  const zkWorker = deps.serving && workerIdRegistryOf(config, { database: true }).startsWith('zookeeper') ? await zkWorkerRootOf(record) : undefined;
  const view = deploymentView(config, {
    serving: deps.serving,
    zkAuth: usesZooKeeper ? (zk?.auth ?? null) : undefined,
    ...(fence ? { fenceRoot: fence } : {}),
    ...(zkWorker ? { zkWorker } : {}),
  });
  // A process that signs records the deployment's keys if none are (an operator's key is judged
  // like any setting; the record's own keys are followed through rotations, never judged).
  const envKey = config.IDMINT_SIGNING_KEY ? parseSigningKey(config.IDMINT_SIGNING_KEY) : undefined;
  if (deps.signs) {
    const kid = await ensureSigningKeys(record, envKey);
    await record.claim({ 'signing-key-id': kid });
    if (envKey) view['signing-key-id'] = envKey.kid;
  }
  // Recorded now (the watch would at its start), so a root chosen by a process that started at
  // the same instant is the one every process uses.
  await record.claim(view);
  const recorded = (await record.read()).values;
  if (fence && recorded['segment-fence']?.startsWith('zookeeper ')) view['segment-fence'] = recorded['segment-fence'];
  if (zkWorker && parseZkRegistry(recorded['worker-id-registry'])) view['worker-id-registry'] = recorded['worker-id-registry'];

  const watch = new DeploymentWatch({
    record,
    view,
    report: { id: `${by}:${randomUUID().slice(0, 8)}`, address: deps.address, roles: deps.roles.join(',') },
    everyMs: config.IDMINT_DEPLOYMENT_CHECK_MS,
    registry: deps.registry,
    logger: deps.logger,
  });
  await watch.start();
  deps.closers.add('deployment watch', () => watch.close());
  // A change to the record or the region split is judged at once, not at the next check.
  const unsubscribe = deps.changes?.subscribe({
    change: (c) => (c.table === 'idmint_setting' || c.table === 'idmint_region') && void watch.check(),
    reset: () => void watch.check(),
  });
  if (unsubscribe) deps.closers.add('deployment changes', async () => unsubscribe());
  const root = view['segment-fence']?.startsWith('zookeeper ') ? view['segment-fence'].slice('zookeeper '.length) : undefined;
  const workerPlace = parseZkRegistry(view['worker-id-registry']);
  const signer = deps.signs
    ? await openSigner(record, { envKey, watch, changes: deps.changes, everyMs: config.IDMINT_DEPLOYMENT_CHECK_MS, logger: deps.logger, closers: deps.closers })
    : undefined;
  return { watch, zk, fenceRoot: root, zkWorker: workerPlace, signer };
}

/**
 * Where this deployment's fence lives: the root the record holds; else, for a database that has
 * handed out segments (its marks are there), the root of before (`fenceRoot`: per schema and
 * region); else a root of the deployment's own, `/idmint/deployments/<id>/fence`, so deployments
 * on other databases sharing one ZooKeeper never share marks (nor their ACLs).
 */
async function fenceRootOf(config: Config, record: PostgresDeploymentRecord): Promise<string> {
  const recorded = (await record.read()).values['segment-fence'];
  if (recorded?.startsWith('zookeeper ')) return recorded.slice('zookeeper '.length);
  if (await record.countersUsed()) return fenceRoot(config);
  return `/idmint/deployments/${await record.id()}/fence`;
}

/**
 * Where this deployment's ZooKeeper worker ids live: as the record holds it; else under the
 * deployment's own root, `/idmint/deployments/<id>/snowflake` (its records and leases are the
 * deployment identity's alone), reading Leaf's shared `/idmint/snowflake/forever` too when the
 * database has tags already (a deployment of an earlier version registered its workers there:
 * those ids stay reserved).
 */
async function zkWorkerRootOf(record: PostgresDeploymentRecord): Promise<ZkWorkerPlace> {
  const recorded = parseZkRegistry((await record.read()).values['worker-id-registry']);
  if (recorded) return recorded;
  const root = `/idmint/deployments/${await record.id()}/snowflake`;
  return (await record.countersUsed()) || (await record.hasTags()) ? { root, leafRoot: ZK_WORKER_ROOT } : { root };
}

export interface ZkWorkerPlace {
  readonly root: string;
  /** Where Leaf's sequential nodes of earlier versions are read (ZooKeeperRegistryOptions.leafRoot). */
  readonly leafRoot?: string;
}

/** `zookeeper <root>[ reading <leafRoot>]`, as the record holds the registry. */
export function zkRegistryValue(place: ZkWorkerPlace): string {
  return `zookeeper ${place.root}${place.leafRoot ? ` reading ${place.leafRoot}` : ''}`;
}

export function parseZkRegistry(value: string | undefined): ZkWorkerPlace | undefined {
  const m = /^zookeeper (\S+)(?: reading (\S+))?$/.exec(value ?? '');
  if (!m) return undefined;
  return m[2] ? { root: m[1]!, leafRoot: m[2] } : { root: m[1]! };
}

/**
 * IDMINT_ZK_AUTH when set; else the credential generated into the record by the deployment's first
 * process, so idmint's ZooKeeper nodes are never world-writable (whoever reaches Postgres has it;
 * no one else does). A deployment that recorded an identity of its own IDMINT_ZK_AUTH has no
 * generated one: a process without the variable then differs, and says so.
 */
async function zooKeeperCredential(config: Config, record: PostgresDeploymentRecord): Promise<ZkCredential | undefined> {
  if (config.IDMINT_ZK_AUTH) return { auth: config.IDMINT_ZK_AUTH, generated: false };
  const recorded = await record.credential();
  if (recorded) return { auth: recorded, generated: true };
  const state = await record.read();
  if (state.ever.has('zookeeper-identity')) return undefined;
  return { auth: await record.claimCredential(`idmint:${randomBytes(24).toString('base64url')}`), generated: true };
}
