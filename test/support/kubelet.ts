import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { podEnv, preStopSeconds, type Container, type K8sObject, type PodTemplate, type Probe } from './chart.js';

/**
 * What a kubelet does to one pod of a rendered manifest, done to a local `idmint serve` process:
 * the container's command (the image's entrypoint `node bin/idmint.js` with the manifest's args),
 * exactly the environment the manifest gives the pod (envFrom, env, fieldRefs, `$(VAR)`), its
 * probes on their periods and thresholds, and its termination (preStop, SIGTERM, SIGKILL after
 * the grace period). Three things a pod has that a local process has not are stood in for, and
 * listed in `overrides`: the pod's IP (a loopback address of its own, 127.0.1.n), its network
 * namespace (it binds that address instead of 0.0.0.0; the manifest's port when free), and the
 * emptyDir (a temp dir at the data dir's mount path's variable).
 */
const BIN = fileURLToPath(new URL('../../bin/idmint.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** What the image's Dockerfile sets (ENV), beneath the manifest's env. */
const IMAGE_ENV = { NODE_ENV: 'production' };

let nextIp = 10;

export interface PodSpec {
  name: string;
  namespace: string;
  /** StatefulSet pods: their ordinal. */
  ordinal?: number;
  workload: K8sObject & { spec: { template: PodTemplate } };
  objects: K8sObject[];
}

export class LocalPod {
  readonly ip = `127.0.1.${nextIp++}`;
  readonly env: Record<string, string>;
  /** What differs from the manifest's env, and why. */
  readonly overrides: Record<string, string> = {};
  readonly container: Container;
  readonly grace: number;
  private child: ChildProcess | undefined;
  private log = '';
  private exitedAt: number | undefined;
  private exitCode: number | null | undefined;
  private exitSignal: NodeJS.Signals | null | undefined;
  port = 8080;
  /** Set when its startup probe passed; `ready` follows the readiness probe. */
  started = false;
  ready = false;
  livenessFailures = 0;
  /** Why the pod failed its startup probe, if it did (the kubelet would restart the container). */
  failure: string | undefined;
  private probing = false;

  constructor(readonly spec: PodSpec) {
    const template = spec.workload.spec.template;
    this.container = template.spec.containers[0]!;
    this.grace = template.spec.terminationGracePeriodSeconds ?? 30;
    this.env = podEnv(spec.objects, this.container, {
      name: spec.name,
      namespace: spec.namespace,
      ip: this.ip,
      ...(spec.ordinal === undefined ? {} : { ordinal: spec.ordinal }),
      labels: template.metadata.labels,
    });
  }

  get url(): string {
    return `http://${this.ip}:${this.port}`;
  }

  get alive(): boolean {
    return this.child !== undefined && this.exitedAt === undefined;
  }

  output(): string {
    return this.log;
  }

  /** Starts the container and runs its probes until it stops. */
  async start(): Promise<void> {
    const dataDir = this.env.IDMINT_DATA_DIR!;
    const emptyDir = mkdtempSync(join(tmpdir(), `idmint-pod-${this.spec.name}-`));
    this.overrides.IDMINT_DATA_DIR = `${emptyDir} (the emptyDir mounted at ${dataDir})`;
    this.port = Number(this.env.IDMINT_PORT ?? 8080);
    if (!(await bindable(this.ip, this.port))) {
      this.port = await freePortOn(this.ip);
      this.overrides.IDMINT_PORT = `${this.port} (${this.env.IDMINT_PORT} is taken on this machine)`;
    }
    this.overrides.IDMINT_HOST = `${this.ip} (the pod's own network: 0.0.0.0 in its namespace is its IP)`;
    const env = { ...IMAGE_ENV, ...this.env, IDMINT_DATA_DIR: emptyDir, IDMINT_HOST: this.ip, IDMINT_PORT: String(this.port) };
    this.child = spawn(process.execPath, [BIN, ...(this.container.args ?? [])], {
      cwd: ROOT,
      // PATH and HOME for node itself; nothing else of this machine's environment.
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: emptyDir, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout!.on('data', (d: Buffer) => (this.log += d.toString()));
    this.child.stderr!.on('data', (d: Buffer) => (this.log += d.toString()));
    this.child.once('exit', (code, signal) => {
      this.exitedAt = Date.now();
      this.exitCode = code;
      this.exitSignal = signal;
      this.ready = false;
    });
    void this.probe().catch((err: unknown) => (this.failure = (err as Error).message));
  }

  /** The kubelet's probes: startup until it passes (or the pod fails), then readiness and liveness. */
  private async probe(): Promise<void> {
    if (this.probing) return;
    this.probing = true;
    const c = this.container;
    const get = async (p: Probe) => {
      const url = `${this.url}${p.httpGet!.path}`;
      const r = await fetch(url, { signal: AbortSignal.timeout((p.timeoutSeconds ?? 1) * 1000) }).catch(() => undefined);
      return r !== undefined && r.status >= 200 && r.status < 400;
    };
    const startup = c.startupProbe!;
    for (let failures = 0; this.alive && !this.started;) {
      if (await get(startup)) this.started = true;
      else if (++failures >= (startup.failureThreshold ?? 3))
        throw new Error(`${this.spec.name}: startup probe failed ${failures} times (the kubelet would restart it)\n${this.log}`);
      else await sleep((startup.periodSeconds ?? 10) * 1000);
    }
    const readiness = c.readinessProbe!;
    const liveness = c.livenessProbe!;
    let readyFailures = 0;
    let nextLiveness = Date.now();
    while (this.alive) {
      if (await get(readiness)) {
        readyFailures = 0;
        this.ready = this.alive;
      } else if (++readyFailures >= (readiness.failureThreshold ?? 3)) this.ready = false;
      if (Date.now() >= nextLiveness) {
        nextLiveness = Date.now() + (liveness.periodSeconds ?? 10) * 1000;
        if (!(await get(liveness)) && this.alive) this.livenessFailures++;
      }
      await sleep((readiness.periodSeconds ?? 10) * 1000);
    }
  }

  /** Resolves when the readiness probe has passed (the endpoints would add the pod). */
  async untilReady(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.ready) {
      if (this.failure) throw new Error(this.failure);
      if (!this.alive) throw new Error(`${this.spec.name} exited (${this.exitCode ?? this.exitSignal}) before it was ready:\n${this.log}`);
      if (Date.now() > deadline) throw new Error(`${this.spec.name} not ready after ${timeoutMs} ms:\n${this.log.slice(-4000)}`);
      await sleep(100);
    }
  }

  /**
   * A graceful delete: the pod leaves the endpoints (`onUnready`), its preStop hook runs (it still
   * serves meanwhile), then SIGTERM, and SIGKILL once the grace period (counted from the start of
   * the delete) is over. Resolves with how it ended.
   */
  async terminate(onUnready: () => void): Promise<{ code: number | null | undefined; signal: NodeJS.Signals | null | undefined; seconds: number }> {
    const started = Date.now();
    this.ready = false;
    onUnready();
    await sleep(preStopSeconds(this.container) * 1000);
    if (this.alive) this.child!.kill('SIGTERM');
    const killAt = started + this.grace * 1000;
    while (this.alive && Date.now() < killAt) await sleep(50);
    if (this.alive) {
      this.child!.kill('SIGKILL');
      while (this.alive) await sleep(20);
    }
    return { code: this.exitCode, signal: this.exitSignal, seconds: (this.exitedAt! - started) / 1000 };
  }

  /** A crash, or `kubectl delete --force --grace-period=0` on a node that still runs the pod: SIGKILL. */
  async kill(): Promise<void> {
    this.ready = false;
    if (this.alive) this.child!.kill('SIGKILL');
    while (this.alive) await sleep(20);
  }
}

async function bindable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, host, () => s.close(() => resolve(true)));
  });
}

async function freePortOn(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, host, () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}
