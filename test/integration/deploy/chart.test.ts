import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';
import { PrometheusRule, ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { parse } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { envSchema, loadConfig } from '../../../src/app/config.js';
import { CLOSE_DEADLINE_MS } from '../../../src/app/signals.js';
import { LEAF_LAYOUT } from '../../../src/core/layout.js';
import { createFastify, opsRoutes } from '../../../src/http/base.js';
import { CHART, helm, k8sTools, podEnv, preStopSeconds, render, ROOT, valuesFiles, workloads, type K8sObject } from '../../support/chart.js';

/**
 * The chart's offline ladder: helm lint --strict and helm template for every values file, every
 * rendered object against the Kubernetes (and Prometheus Operator) schemas of kubernetes-models,
 * and contract tests on what is rendered. No cluster runs here (docs/deploy.md, "Kubernetes").
 */
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'apps/v1/StatefulSet': StatefulSet,
  'apps/v1/Deployment': Deployment,
  'v1/Service': Service,
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/ServiceAccount': ServiceAccount,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule,
};

const files = valuesFiles();
const rendered = new Map<string, K8sObject[]>();
/** The chart's values with a file's on top, merged as helm merges them (maps deeply). */
const values = (file: string): Record<string, Record<string, unknown>> =>
  merge(parse(readFileSync(join(CHART, 'values.yaml'), 'utf8')), parse(readFileSync(join(CHART, file), 'utf8'))) as never;
function merge(a: unknown, b: unknown): unknown {
  if (typeof a !== 'object' || a === null || Array.isArray(a) || typeof b !== 'object' || b === null || Array.isArray(b)) return b === undefined ? a : b;
  const out: Record<string, unknown> = { ...(a as Record<string, unknown>) };
  for (const [k, v] of Object.entries(b)) out[k] = merge(out[k], v);
  return out;
}

beforeAll(async () => {
  k8sTools();
  for (const file of files) rendered.set(file, await render({ values: file === 'values.yaml' ? [] : [file] }));
}, 120_000);

const matches = (selector: Record<string, string>, labels: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels[k] === v);

describe('the Helm chart (deploy/helm/idmint)', () => {
  it('ships the values files this test knows: the defaults, servers outside the cluster, the replicated topology, the API as a Deployment', () => {
    expect(files).toEqual(['values-deployment.yaml', 'values-external.yaml', 'values-replicated.yaml', 'values.yaml']);
  });

  it.each(files)('helm lint --strict is clean with %s', async (file) => {
    const { stdout } = await helm(['lint', '--strict', CHART, '-f', join(CHART, file)]);
    expect(stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
    expect(stdout).not.toMatch(/\[(WARNING|ERROR)\]/);
  });

  it.each(files)('%s: every rendered object passes its Kubernetes schema (kubernetes-models)', (file) => {
    const objects = rendered.get(file)!;
    expect(objects.length).toBeGreaterThan(5);
    for (const o of objects) {
      const Model = MODELS[`${o.apiVersion}/${o.kind}`];
      expect(Model, `no schema check for ${o.apiVersion} ${o.kind}: add it to MODELS`).toBeDefined();
      expect(() => new Model!(o as never).validate(), `${o.kind} ${o.metadata.name}`).not.toThrow();
    }
  });

  it.each(files)('%s: selectors match pod labels; services, PDBs, the HPA and the ServiceMonitor find what they name', (file) => {
    const objects = rendered.get(file)!;
    const pods = workloads(objects);
    for (const w of pods) expect(matches(w.spec.selector.matchLabels, w.spec.template.metadata.labels), `${w.kind} ${w.metadata.name}`).toBe(true);
    const selecting = (selector: Record<string, string>) => pods.filter((w) => matches(selector, w.spec.template.metadata.labels));
    for (const s of objects.filter((o) => o.kind === 'Service'))
      expect(selecting((s.spec as { selector: Record<string, string> }).selector).length, `Service ${s.metadata.name}`).toBeGreaterThan(0);
    for (const p of objects.filter((o) => o.kind === 'PodDisruptionBudget')) {
      expect(selecting((p.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels), `PDB ${p.metadata.name}`).toHaveLength(1);
    }
    for (const sts of pods.filter((w) => w.kind === 'StatefulSet')) {
      const headless = objects.find((o) => o.kind === 'Service' && o.metadata.name === (sts.spec as { serviceName?: string }).serviceName);
      expect(headless, 'the StatefulSet names its governing service').toBeDefined();
      expect((headless!.spec as { clusterIP?: string }).clusterIP).toBe('None');
    }
    for (const hpa of objects.filter((o) => o.kind === 'HorizontalPodAutoscaler')) {
      const ref = (hpa.spec as { scaleTargetRef: { kind: string; name: string } }).scaleTargetRef;
      expect(pods.some((w) => w.kind === ref.kind && w.metadata.name === ref.name)).toBe(true);
    }
    for (const sm of objects.filter((o) => o.kind === 'ServiceMonitor')) {
      const sel = (sm.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels;
      expect(
        objects.filter((o) => o.kind === 'Service' && matches(sel, o.metadata.labels ?? {})),
        'the ServiceMonitor selects a service',
      ).toHaveLength(1);
    }
  });

  it.each(files)('%s: probes name real routes on a declared port; the grace period exceeds preStop plus the drain', async (file) => {
    const app = createFastify({ component: 'chart-test' });
    opsRoutes(app, { registry: { contentType: 'text/plain; version=0.0.4; charset=utf-8', metrics: async () => '' } });
    for (const w of workloads(rendered.get(file)!)) {
      const { spec } = w.spec.template;
      for (const c of spec.containers) {
        for (const probe of [c.startupProbe, c.readinessProbe, c.livenessProbe]) {
          expect(probe?.httpGet, `${w.metadata.name}: every probe is an HTTP GET`).toBeDefined();
          const { path, port } = probe!.httpGet!;
          expect((await app.inject({ method: 'GET', url: path })).statusCode, `${path} is a route`).not.toBe(404);
          expect(
            c.ports!.some((p) => p.name === port || p.containerPort === port),
            `probe port ${port}`,
          ).toBe(true);
        }
        expect(c.readinessProbe!.httpGet!.path).toBe('/readyz');
        expect(c.livenessProbe!.httpGet!.path).toBe('/healthz');
        // A StatefulSet pod may wait for its ordinal (IDMINT_WORKER_ID_WAIT_MS) before it listens.
        const startup = c.startupProbe!;
        expect((startup.periodSeconds ?? 10) * (startup.failureThreshold ?? 3)).toBeGreaterThan(
          Number(values(file).workerIds!.waitMs) / 1000 + Number(values(file).workerIds!.leaseMs) / 1000,
        );
        expect(spec.terminationGracePeriodSeconds!, `${w.metadata.name}`).toBeGreaterThan(preStopSeconds(c) + CLOSE_DEADLINE_MS / 1000);
        expect(preStopSeconds(c)).toBeGreaterThan(0);
      }
    }
    await app.close();
  });

  it.each(files)('%s: replicas fit the worker-id space; API StatefulSet pods prefer their ordinal, every pod leases', (file) => {
    const objects = rendered.get(file)!;
    const v = values(file);
    const space = Number(v.workerIds!.space);
    expect(space).toBeLessThanOrEqual(LEAF_LAYOUT.maxWorkerId + 1);
    const hpa = objects.find((o) => o.kind === 'HorizontalPodAutoscaler');
    let issuing = 0;
    for (const w of workloads(objects)) {
      const c = w.spec.template.spec.containers[0]!;
      const role = c.env!.find((e) => e.name === 'IDMINT_ROLES')!.value!;
      const max = role === 'api' && hpa ? (hpa.spec as { maxReplicas: number }).maxReplicas : (w.spec.replicas ?? 1);
      if (role !== 'refill') issuing += max; // the API and the responders hand out IDs; refill workers do not
      const ordinal = c.env!.find((e) => e.name === 'IDMINT_WORKER_ID_ORDINAL');
      if (w.kind === 'StatefulSet') {
        expect(ordinal?.valueFrom?.fieldRef?.fieldPath).toBe("metadata.labels['apps.kubernetes.io/pod-index']");
        expect(max - 1, 'the highest ordinal is an id of the space').toBeLessThan(space);
      } else expect(ordinal).toBeUndefined();
    }
    expect(issuing, 'pods that issue IDs at most, each holding a worker id').toBeLessThanOrEqual(space);
    const config = objects.find((o) => o.kind === 'ConfigMap')!.data!;
    expect(['zookeeper', 'postgres', 'redis']).toContain(config.IDMINT_WORKER_ID_PROVIDER);
  });

  it.each(files)('%s: the image is pinned; pods run as non-root on a read-only root filesystem, the data dir an emptyDir', (file) => {
    for (const w of workloads(rendered.get(file)!)) {
      const { spec } = w.spec.template;
      expect(spec.securityContext).toMatchObject({ runAsNonRoot: true });
      for (const c of spec.containers) {
        expect(c.image, 'a tag other than latest, or a digest').toMatch(/^[^:@]+(:(?!latest$)[\w][\w.-]*|@sha256:[0-9a-f]{64})$/);
        expect(c.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
        const dataDir = c.env!.find((e) => e.name === 'IDMINT_DATA_DIR')!.value!;
        const mount = c.volumeMounts!.find((m) => m.mountPath === dataDir)!;
        expect(mount, 'IDMINT_DATA_DIR is a mounted volume').toBeDefined();
        expect(spec.volumes!.find((vol) => vol.name === mount.name)!.emptyDir).toBeDefined();
        expect(c.volumeMounts!.some((m) => m.mountPath === '/tmp')).toBe(true);
      }
    }
  });

  it.each(files)('%s: every pod gets only documented variables, and a configuration idmint accepts', (file) => {
    const objects = rendered.get(file)!;
    const documented = new Set(Object.keys(envSchema.shape));
    const ca = join(mkdtempSync(join(tmpdir(), 'idmint-chart-')), 'ca.pem');
    writeFileSync(ca, '-----BEGIN CERTIFICATE-----\nMA==\n-----END CERTIFICATE-----\n');
    for (const w of workloads(objects)) {
      const c = w.spec.template.spec.containers[0]!;
      const ordinal = w.kind === 'StatefulSet' ? 2 : undefined;
      const env = podEnv(objects, c, {
        name: `${w.metadata.name}-${ordinal ?? 'x7k2p'}`,
        namespace: 'idmint',
        ip: '10.1.2.3',
        ordinal,
        labels: w.spec.template.metadata.labels,
      });
      for (const name of Object.keys(env))
        if (!name.startsWith('POD_')) expect(documented.has(name), `${w.metadata.name}: ${name} is not a variable idmint reads`).toBe(true);
      for (const [name, value] of Object.entries(env)) expect(value, `${name} is set but empty`).not.toBe('');
      // The CA file the chart mounts from your Secret: a stand-in, since loadConfig reads it.
      for (const name of ['IDMINT_REDIS_TLS_CA', 'IDMINT_KAFKA_TLS_CA']) if (env[name]) env[name] = ca;
      const config = loadConfig(env);
      expect(config.IDMINT_ROLES).toBe(c.env!.find((e) => e.name === 'IDMINT_ROLES')!.value);
      if (ordinal !== undefined) {
        expect(config.IDMINT_WORKER_ID_ORDINAL).toBe('2');
        expect(config.IDMINT_ADVERTISE).toMatch(new RegExp(`^${w.metadata.name}-2\\..+-headless\\.idmint\\.svc:8080$`));
      } else expect(config.IDMINT_ADVERTISE).toBe('10.1.2.3:8080');
    }
  });

  it("the PrometheusRule carries monitoring/alerts.yml, and the chart's copy of it is the same file", () => {
    const shipped = readFileSync(join(CHART, 'files/alerts.yml'), 'utf8');
    expect(shipped).toBe(readFileSync(join(ROOT, 'monitoring/alerts.yml'), 'utf8'));
    const rule = rendered.get('values-replicated.yaml')!.find((o) => o.kind === 'PrometheusRule')!;
    expect(rule.spec).toEqual(parse(shipped));
  });

  it('the Secret holds only what is set; an unset admin token is generated', () => {
    const secret = rendered.get('values.yaml')!.find((o) => o.kind === 'Secret')!;
    expect(Object.keys(secret.stringData!).sort()).toEqual(['DATABASE_URL', 'IDMINT_ADMIN_TOKEN', 'KAFKA_BROKERS', 'REDIS_URL', 'ZK_CONNECT']);
    expect(secret.stringData!.IDMINT_ADMIN_TOKEN).toMatch(/^[A-Za-z0-9]{32}$/);
    expect(rendered.get('values-external.yaml')!.find((o) => o.kind === 'Secret')!.stringData!.IDMINT_ZK_AUTH).toBe('idmint:example-zk-password');
  });

  it('refuses what would break an invariant: an unpinned image, a file worker id, an HPA beyond the worker-id space, a grace period shorter than the drain', async () => {
    await expect(render({ set: { 'image.tag': 'latest' } })).rejects.toThrow(/image\/tag/);
    await expect(render({ set: { 'workerIds.provider': 'file' } })).rejects.toThrow(/workerIds\/provider/);
    await expect(render({ values: ['values-replicated.yaml'], set: { 'api.hpa.maxReplicas': 1022 } })).rejects.toThrow(
      /would need 1025 worker ids, more than workerIds.space \(1024\)/,
    );
    await expect(render({ set: { terminationGracePeriodSeconds: 12 } })).rejects.toThrow(/must exceed preStopSleepSeconds \+ drainSeconds/);
  });
});
