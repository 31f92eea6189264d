import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LEAF_LAYOUT } from '../../src/core/layout.js';
import { createPgDatabase } from '../../src/store/index.js';
import { render, workloads, type K8sObject } from '../support/chart.js';
import { env } from '../support/env.js';
import { LocalPod } from '../support/kubelet.js';
import { sleep, until } from '../support/poll.js';
import { expectNoDuplicates } from '../support/unique.js';

/**
 * A rehearsal of what Kubernetes does to idmint's pods, driven by the chart's rendered manifests
 * (no cluster can run here): each pod is a local `idmint serve` started with exactly the env the
 * manifest gives it, probed and terminated as the manifest says (test/support/kubelet.ts). Under
 * load on a Snowflake tag and a segment tag through the API pods that are Ready: a rolling update
 * of the API StatefulSet one pod at a time, highest ordinal first, never below what its PDB allows;
 * a SIGKILLed pod recreated by the controller (it waits for its ordinal's lease); and two live pods
 * with one ordinal (a force-deleted pod that still runs, and its replacement). Every ID is kept:
 * 0 duplicates. What this cannot show (kubelet, scheduler, eviction API, DNS) is in docs/deploy.md, "Kubernetes".
 */
const id = randomBytes(4).toString('hex');
const NS = 'rehearsal';
const TOKEN = `rehearsal-admin-${id}`;

interface Cluster {
  objects: K8sObject[];
  pods: Map<string, LocalPod>;
}

const cluster: Cluster = { objects: [], pods: new Map() };
const all: LocalPod[] = [];
const ids: string[] = [];
const errors = new Map<string, number>();
const phases: string[] = [];
let load: Promise<void> | undefined;
let loading = true;
let minReadyApi = Infinity;

/** The manifests for the local servers, with a setting that changes the pod template (a rollout). */
async function manifests(logLevel: string): Promise<K8sObject[]> {
  return render({
    release: 'idmint',
    namespace: NS,
    set: {
      'servers.databaseUrl': env('DATABASE_URL'),
      'servers.redisUrl': env('REDIS_URL'),
      'servers.kafkaBrokers': env('KAFKA_BROKERS'),
      'servers.zkConnect': env('ZK_CONNECT'),
      'secrets.adminToken': TOKEN,
      'api.replicas': 3,
      'refill.replicas': 1,
      'responder.replicas': 1,
      // This run's own names on the shared servers.
      'config.IDMINT_PG_SCHEMA': `rehearsal_${id}`,
      'config.IDMINT_POOL_KEY_PREFIX': `rehearsal-${id}:`,
      'config.IDMINT_REFILL_QUEUE': `rehearsal-${id}`,
      'config.IDMINT_KAFKA_NAMESPACE': `reh-${id}`,
      'config.LOG_LEVEL': logLevel,
    },
  });
}

const apiWorkload = (objects: K8sObject[]) => workloads(objects).find((w) => w.kind === 'StatefulSet')!;
const readyApi = () => [...cluster.pods.values()].filter((p) => p.ready && p.env.IDMINT_ROLES === 'api');
const pdbMaxUnavailable = (objects: K8sObject[], name: string) =>
  Number((objects.find((o) => o.kind === 'PodDisruptionBudget' && o.metadata.name === name)!.spec as { maxUnavailable: number }).maxUnavailable);

function podsOf(objects: K8sObject[]): LocalPod[] {
  const out: LocalPod[] = [];
  for (const w of workloads(objects)) {
    const replicas = w.spec.replicas ?? 1;
    for (let i = 0; i < replicas; i++) {
      const name = w.kind === 'StatefulSet' ? `${w.metadata.name}-${i}` : `${w.metadata.name}-7d9f8c${i}-${randomBytes(3).toString('hex').slice(0, 5)}`;
      out.push(new LocalPod({ name, namespace: NS, ...(w.kind === 'StatefulSet' ? { ordinal: i } : {}), workload: w, objects }));
    }
  }
  return out;
}

async function startPod(pod: LocalPod): Promise<void> {
  all.push(pod);
  cluster.pods.set(pod.spec.name, pod);
  await pod.start();
}

/** The worker id a pod holds, from its /readyz. */
async function workerOf(pod: LocalPod): Promise<number> {
  const body = (await (await fetch(`${pod.url}/readyz`)).json()) as { checks: { snowflake?: { message?: string } } };
  return Number(/worker (\d+)/.exec(body.checks.snowflake?.message ?? '')?.[1] ?? NaN);
}

/** Load through the API service: round-robin over the Ready API pods (the endpoints). */
async function runLoad(): Promise<void> {
  let turn = 0;
  const loop = async (tag: string) => {
    while (loading) {
      const endpoints = readyApi();
      minReadyApi = Math.min(minReadyApi, endpoints.length);
      const pod = endpoints[turn++ % Math.max(1, endpoints.length)];
      if (!pod) {
        await sleep(20);
        continue;
      }
      try {
        const r = await fetch(`${pod.url}/v1/ids/${tag}?count=50`, { signal: AbortSignal.timeout(5000) });
        const body = (await r.json()) as { ids?: string[]; error?: { code: string } };
        if (r.ok) ids.push(...body.ids!);
        else errors.set(body.error?.code ?? String(r.status), (errors.get(body.error?.code ?? String(r.status)) ?? 0) + 1);
      } catch {
        errors.set('CONNECTION', (errors.get('CONNECTION') ?? 0) + 1); // a pod in the middle of going away
        await sleep(20);
      }
    }
  };
  await Promise.all([loop(`rsnow-${id}`), loop(`rsnow-${id}`), loop(`rseg-${id}`)]);
}

beforeAll(async () => {
  cluster.objects = await manifests('info');
  // Pods of a StatefulSet with podManagementPolicy Parallel and the Deployments: started together.
  const pods = podsOf(cluster.objects);
  await Promise.all(pods.map((p) => startPod(p)));
  await Promise.all(pods.map((p) => p.untilReady(120_000)));
  const api = readyApi()[0]!;
  for (const [bizTag, mode] of [
    [`rsnow-${id}`, 'snowflake'],
    [`rseg-${id}`, 'segment'],
  ] as const) {
    const r = await fetch(`${api.url}/v1/biz`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ bizTag, mode, step: 500 }),
    });
    expect(r.status, await r.text()).toBe(201);
  }
  await until(
    'every API pod to know the tags',
    async () => (await Promise.all(readyApi().map((p) => fetch(`${p.url}/v1/ids/rsnow-${id}`).then((r) => r.ok)))).every(Boolean),
    { timeoutMs: 30_000 },
  );
  load = runLoad();
}, 300_000);

afterAll(async () => {
  loading = false;
  await load;
  await Promise.all([...cluster.pods.values()].map((p) => p.terminate(() => undefined)));
  await Promise.all(all.map((p) => p.kill()));
  const db = createPgDatabase({ connectionString: env('DATABASE_URL') });
  await db.query(`DROP SCHEMA IF EXISTS rehearsal_${id} CASCADE`).catch(() => undefined);
  await db.close();
}, 180_000);

describe('a rehearsal driven by the rendered manifests', () => {
  it("every pod starts with the manifest's env (three stand-ins: its IP, its bind address, its emptyDir); the API pods hold their ordinals, the responder another free id", async () => {
    const api = [0, 1, 2].map((i) => cluster.pods.get(`idmint-api-${i}`)!);
    for (const [i, pod] of api.entries()) {
      expect(pod.env.IDMINT_WORKER_ID_ORDINAL).toBe(String(i));
      expect(pod.env.IDMINT_ADVERTISE).toBe(`idmint-api-${i}.idmint-api-headless.${NS}.svc:8080`);
      expect(await workerOf(pod)).toBe(i);
    }
    const responder = [...cluster.pods.values()].find((p) => p.env.IDMINT_ROLES === 'responder')!;
    // Any free id but the ordinals' (free ids are tried from the top down; the bottom is the ordinals').
    const responderWorker = await workerOf(responder);
    expect(responderWorker).toBeGreaterThanOrEqual(api.length);
    expect(responderWorker).toBeLessThanOrEqual(LEAF_LAYOUT.maxWorkerId);
    for (const pod of cluster.pods.values()) expect(Object.keys(pod.overrides).sort()).toEqual(expect.arrayContaining(['IDMINT_DATA_DIR', 'IDMINT_HOST']));
    console.info(`rehearsal: pod env overrides: ${JSON.stringify(api[0]!.overrides)}`);
    await until('IDs to flow', () => ids.length > 5000);
    phases.push(`start: ${ids.length} IDs`);
  });

  it('a rolling update of the API StatefulSet: one pod at a time, highest ordinal first, each Ready before the next, never more unavailable than its PDB allows', async () => {
    const next = await manifests('warn'); // the pod template changes: a new revision
    const sts = apiWorkload(next);
    const maxUnavailable = pdbMaxUnavailable(next, 'idmint-api');
    const replicas = sts.spec.replicas!;
    minReadyApi = Infinity;
    const before = ids.length;
    for (let ordinal = replicas - 1; ordinal >= 0; ordinal--) {
      const name = `idmint-api-${ordinal}`;
      // The StatefulSet controller waits for every other pod to be Ready before it deletes the next.
      await until(`all API pods Ready before ${name} is replaced`, () => readyApi().length === replicas, { timeoutMs: 120_000 });
      expect(replicas - readyApi().length + 1, 'the delete the PDB allows').toBeLessThanOrEqual(maxUnavailable);
      const old = cluster.pods.get(name)!;
      const end = await old.terminate(() => undefined);
      expect(end.signal, `${name} was killed at the end of its grace period`).not.toBe('SIGKILL');
      expect(end.code).toBe(0);
      const pod = new LocalPod({ name, namespace: NS, ordinal, workload: sts, objects: next });
      await startPod(pod);
      await pod.untilReady(120_000);
      expect(pod.env.LOG_LEVEL).toBe('warn');
      expect(await workerOf(pod), `${name} takes its ordinal back`).toBe(ordinal);
    }
    cluster.objects = next;
    expect(minReadyApi, 'Ready API pods during the rollout').toBeGreaterThanOrEqual(replicas - maxUnavailable);
    await until('IDs to flow after the rollout', () => ids.length > before + 5000);
    phases.push(`rolling update: ${ids.length - before} IDs, never fewer than ${minReadyApi} of ${replicas} API pods Ready`);
  });

  it("a SIGKILLed pod: the controller recreates it (a new emptyDir); it waits for its ordinal's lease to expire, says why, and takes it back", async () => {
    const before = ids.length;
    const name = 'idmint-api-1';
    const victim = cluster.pods.get(name)!;
    await victim.kill();
    const killedAt = Date.now();
    const pod = new LocalPod({ name, namespace: NS, ordinal: 1, workload: apiWorkload(cluster.objects), objects: cluster.objects });
    await startPod(pod);
    await until(`${name} to say why it waits`, () => pod.output().includes('still leased under this identity'), { timeoutMs: 30_000 });
    await pod.untilReady(120_000);
    const waited = Date.now() - killedAt;
    expect(await workerOf(pod)).toBe(1);
    expect(waited, 'it took the ordinal over only once the lease could have expired').toBeGreaterThan(Number(pod.env.IDMINT_WORKER_ID_LEASE_MS) / 2);
    await until('IDs to flow', () => ids.length > before + 5000);
    phases.push(`SIGKILL of ${name}: back with worker 1 after ${(waited / 1000).toFixed(1)} s, ${ids.length - before} IDs`);
  });

  it('two live pods with one ordinal (a force-deleted pod that still runs, and its replacement): only one issues; the replacement takes over once the old one is gone', async () => {
    const before = ids.length;
    const name = 'idmint-api-0';
    const old = cluster.pods.get(name)!;
    // The API server forgot the pod (force delete); its node still runs it and it still serves.
    const replacement = new LocalPod({ name, namespace: NS, ordinal: 0, workload: apiWorkload(cluster.objects), objects: cluster.objects });
    all.push(replacement);
    await replacement.start();
    await until('the replacement to say why it waits', () => replacement.output().includes('still leased under this identity'), { timeoutMs: 30_000 });
    await sleep(5000);
    expect(replacement.started, 'the replacement served while the old pod held the ordinal').toBe(false);
    expect(old.ready).toBe(true);
    // The old pod finally dies (its node is fenced or comes back and kills it).
    await old.kill();
    const goneAt = Date.now();
    cluster.pods.set(name, replacement);
    await replacement.untilReady(120_000);
    expect(await workerOf(replacement)).toBe(0);
    await until('IDs to flow', () => ids.length > before + 5000);
    phases.push(
      `two live pods with ordinal 0: the replacement waited, took over ${((Date.now() - goneAt) / 1000).toFixed(1)} s after the old one died, ${ids.length - before} IDs`,
    );
  });

  it('every ID handed out through all of it is unique', async () => {
    loading = false;
    await load;
    const snow = ids.filter((x) => BigInt(x) >= 2n ** 53n).length;
    console.info(
      `rehearsal: ${ids.length} IDs (${snow} Snowflake, ${ids.length - snow} segment), errors ${JSON.stringify([...errors])}, liveness failures ${all.reduce((n, p) => n + p.livenessFailures, 0)}; ${phases.join('; ')}`,
    );
    expect(ids.length).toBeGreaterThan(20_000);
    expect(snow).toBeGreaterThan(10_000);
    expectNoDuplicates(ids, 'IDs of the rehearsal');
    for (const pod of all) expect(pod.livenessFailures, `${pod.spec.name} failed its liveness probe`).toBe(0);
  });
});
