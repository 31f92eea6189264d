import { Gauge, type Registry } from 'prom-client';
import { DEPLOYMENT_SETTINGS, describePaths, judge, settingRule, type DeploymentView, type Difference, type GuardedPath } from '../core/deployment.js';
import { silentLogger, type Logger } from '../core/logger.js';
import type { PostgresDeploymentRecord, ProcessReport } from '../store/deployment-record.js';

export interface DeploymentWatchOptions {
  record: Pick<PostgresDeploymentRecord, 'read' | 'claim' | 'heartbeat' | 'leave'>;
  /** What this process holds (a setting it does not use is absent). */
  view: DeploymentView;
  /** How this process is listed in `idmint deployment show`. */
  report: Omit<ProcessReport, 'view'>;
  /** How often the record is read again (a pushed change reads it at once). Default 5000 ms. */
  everyMs?: number;
  registry?: Registry;
  logger?: Logger;
}

/**
 * Holds a process to its deployment's record (DESIGN invariant 9) at start and every few seconds
 * while it runs: a difference closes exactly the paths it would break (`refusal(path)`), is one
 * error line naming the variable, `/readyz` degraded naming it, and `idmint_deployment_mismatch`
 * at 1 (alert IdmintDeploymentMismatch). With Postgres away the last judgement stands.
 */
export class DeploymentWatch {
  private current: readonly Difference[] = [];
  /** What this process saw recorded: a setting that vanishes afterwards is told from one never confirmed. */
  private held: DeploymentView = {};
  private readonly listeners = new Set<() => void>();
  private readonly log: Logger;
  private readonly gauge: Gauge<'setting'> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<void> | undefined;
  private again = false;
  private closed = false;

  constructor(private readonly options: DeploymentWatchOptions) {
    this.log = (options.logger ?? silentLogger).child({ component: 'deployment' });
    if (options.registry) {
      this.gauge = new Gauge({
        name: 'idmint_deployment_mismatch',
        help: "1 while this process's value of a deployment-wide setting differs from the deployment record (what it would break is refused here; /readyz names it)",
        labelNames: ['setting'] as const,
        registers: [options.registry],
      });
      for (const setting of DEPLOYMENT_SETTINGS) if (options.view[setting] !== undefined) this.gauge.set({ setting }, 0);
    }
  }

  /** Records what the record never held, judges, and keeps judging every `everyMs`. Throws when Postgres cannot be read at start. */
  async start(): Promise<void> {
    await this.options.record.claim(this.options.view);
    await this.run();
    this.timer = setInterval(() => void this.check(), this.options.everyMs ?? 5000);
    this.timer.unref();
  }

  /** Reads the record now (a pushed change); concurrent calls share one read, and one more runs after it. */
  check(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.checking) {
      this.again = true;
      return this.checking;
    }
    this.checking = this.run()
      .catch((err: unknown) => this.log.debug({ err: (err as Error).message }, 'reading the deployment record failed; the last judgement stands'))
      .finally(() => {
        this.checking = undefined;
        if (this.again) {
          this.again = false;
          void this.check();
        }
      });
    return this.checking;
  }

  /** Why this process must not serve `path` now, or undefined. */
  refusal(path: GuardedPath): string | undefined {
    return this.current.find((d) => d.closes.includes(path))?.message;
  }

  get differences(): readonly Difference[] {
    return this.current;
  }

  /**
   * For /readyz: absent when the process agrees with the record. The hint is public (it names
   * settings and variables, never values); the message, for the log, says the values too.
   */
  health(): { ok: boolean; message: string; hint: string } | undefined {
    const first = this.current[0];
    if (!first) return undefined;
    const parts = this.current.map((d) =>
      d.vanished
        ? `${d.setting} vanished from the record (restore it with \`idmint deployment set ${d.setting}\`)`
        : `${d.setting} differs (check ${settingRule(d.setting).variables})`,
    );
    const refused = [...new Set(this.current.flatMap((d) => d.closes))];
    return {
      ok: false,
      message: first.message,
      hint: `this process and the deployment record disagree: ${parts.join('; ')}; ${refused.length > 0 ? `refused here: ${describePaths(refused)}` : 'nothing is refused'}. \`idmint deployment show\` lists what each live process holds`,
    };
  }

  /** Called whenever the differences change (the refill worker pauses and resumes on it). */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    await this.checking;
    await this.options.record.leave(this.options.report.id).catch(() => undefined);
  }

  private async run(): Promise<void> {
    const record = await this.options.record.read();
    const next = judge(record, this.options.view, this.held);
    for (const [setting, value] of Object.entries(record.values)) if (value !== undefined) this.held[setting as keyof DeploymentView] = value;
    this.apply(next);
    await this.options.record.heartbeat({ ...this.options.report, view: this.options.view });
  }

  private apply(next: readonly Difference[]): void {
    const before = new Map(this.current.map((d) => [d.setting, d]));
    const after = new Map(next.map((d) => [d.setting, d]));
    let changed = false;
    for (const d of next) {
      const old = before.get(d.setting);
      if (old && old.message === d.message) continue;
      changed = true;
      const fields = { setting: d.setting, variable: settingRule(d.setting).variables, recorded: d.recorded ?? null, mine: d.mine, refused: d.closes };
      if (d.closes.length > 0) this.log.error(fields, d.message);
      else this.log.warn(fields, d.message);
      this.gauge?.set({ setting: d.setting }, 1);
    }
    for (const [setting, d] of before) {
      if (after.has(setting)) continue;
      changed = true;
      this.log.info({ setting, value: d.mine }, `${settingRule(setting).what} agrees with the deployment record again; nothing is refused for it`);
      this.gauge?.set({ setting }, 0);
    }
    this.current = next;
    if (changed) for (const listener of this.listeners) listener();
  }
}
