import type { ProcessReport } from './store.js';

/** A report older than this many sample intervals is a silent process. */
export const SILENT_INTERVALS = 3;
/** A process that stopped cleanly stays listed (grey) this long, then it is forgotten. */
export const STOPPED_KEEP_MS = 5 * 60_000;
/** A silent process stays listed (red) this long after its last report, then it is forgotten. */
export const FORGET_MS = 10 * 60_000;

/**
 * What the page says of a process: its readiness when its report is fresh; `silent` (red) when it
 * stopped reporting without saying goodbye; `stopped` (grey) when it said so, or a newer process
 * took its address; `unheard` (grey) while the shared store (Redis) cannot be read, so its
 * silence says nothing (Postgres may still say it is alive).
 */
export type ProcessState = ProcessReport['status'] | 'silent' | 'stopped' | 'unheard';

/** A process as the deployment record in Postgres lists it (`idmint_process`): present while it heartbeats. */
export interface LiveProcess {
  readonly id: string;
  readonly address: string;
  /** Comma-separated, as recorded. */
  readonly roles: string;
  readonly seenAt: Date | number;
}

export interface ProcessRow {
  readonly id: string;
  /** `host:port` as the process advertises it (IDMINT_ADVERTISE, or its listen address), else `host:pid`. */
  readonly name: string;
  readonly host: string;
  readonly pid: number;
  readonly roles: string[];
  readonly version: string;
  readonly startedAt: number;
  readonly at: number;
  readonly status: ProcessReport['status'] | 'unknown';
  readonly checks: ProcessReport['checks'];
  readonly state: ProcessState;
  /** Since the last report. */
  readonly silentMs: number;
  /** The report is older than SILENT_INTERVALS (kept for readers of before: `state` says more). */
  readonly silent: boolean;
  readonly stoppedAt?: number;
  /** Why the state is what it is, when the state alone does not say. */
  readonly note?: string;
  /** The process serving the page. */
  readonly self: boolean;
}

export interface ProcessRowsInput {
  /** Every report in the store (or as last read). */
  reports: readonly ProcessReport[];
  /** The process serving the page, as it is now. */
  self: ProcessReport;
  now: number;
  sampleMs: number;
  /** False while the shared store cannot be read: the other reports are as last read, and their age says nothing. */
  heard: boolean;
  /** The processes Postgres saw heartbeating lately, when it could be read. */
  live?: readonly LiveProcess[] | undefined;
}

/** How the page and the summary name a process: its address, or `host:pid` for a report without one. */
export function processName(r: Pick<ProcessReport, 'address' | 'host' | 'pid'>): string {
  return r.address ?? `${r.host}:${r.pid}`;
}

/** A process with its roles, for one-line lists: `10.0.0.5:8081 (api, refill)`. */
export function processLabel(r: Pick<ProcessRow, 'name' | 'roles'>): string {
  return r.roles.length > 0 ? `${r.name} (${r.roles.join(', ')})` : r.name;
}

/** Whether a report should leave the store: stopped long enough ago, or silent for FORGET_MS. */
export function forgotten(report: Pick<ProcessReport, 'at' | 'stoppedAt'>, now: number): boolean {
  return report.stoppedAt !== undefined ? now - report.stoppedAt > STOPPED_KEEP_MS : now - report.at > FORGET_MS;
}

/** The process table: this process first, then by name; forgotten reports left out. */
export function processRows(input: ProcessRowsInput): ProcessRow[] {
  const { self, now, sampleMs, heard, live } = input;
  const silentAfter = SILENT_INTERVALS * sampleMs;
  const others = input.reports.filter((r) => r.id !== self.id && !forgotten(r, now));
  const matched = new Set<string>();
  const rows = others.map((r): ProcessRow => {
    const base = rowOf(r, now, silentAfter);
    if (r.stoppedAt !== undefined) return { ...base, state: 'stopped' };
    if (heard) return base.silent ? { ...base, state: 'silent' } : base;
    const seen = live && findLive(live, r);
    if (seen) {
      matched.add(seen.id);
      return { ...base, state: 'unheard', note: `its reports are in Redis, which cannot be read; Postgres saw it ${seconds(now - toMs(seen.seenAt))} ago` };
    }
    if (live) return { ...base, state: 'silent', silent: true, note: 'its reports are in Redis, which cannot be read, and Postgres has not seen it lately' };
    return { ...base, state: 'unheard', note: 'its reports are in Redis, which cannot be read' };
  });
  // A silent process whose address a newer process now holds was restarted: it is stopped, not silent.
  const replaced = rows.map((row) => {
    if (row.state !== 'silent') return row;
    const successor = [rowOf(self, now, silentAfter), ...rows].find(
      (o) => o.id !== row.id && o.name === row.name && o.startedAt > row.startedAt && (o.state === 'unheard' || !o.silent),
    );
    return successor ? { ...row, state: 'stopped' as const, note: `replaced by the process started ${new Date(successor.startedAt).toISOString()}` } : row;
  });
  // While Redis cannot be read, Postgres still lists the processes that heartbeat.
  const fromPostgres = heard || !live ? [] : live.filter((l) => !matched.has(l.id) && !l.id.startsWith(`${self.id}:`)).map((l) => rowOfLive(l, now));
  const sorted = [...replaced, ...fromPostgres].sort(
    (a, b) => a.name.localeCompare(b.name) || a.roles.join().localeCompare(b.roles.join()) || a.startedAt - b.startedAt,
  );
  return [{ ...rowOf(self, now, silentAfter), self: true }, ...sorted];
}

function rowOf(r: ProcessReport, now: number, silentAfter: number): ProcessRow {
  const silentMs = now - r.at;
  const silent = silentMs > silentAfter;
  return {
    id: r.id,
    name: processName(r),
    host: r.host,
    pid: r.pid,
    roles: [...r.roles],
    version: r.version,
    startedAt: r.startedAt,
    at: r.at,
    status: r.status,
    checks: r.checks,
    state: r.status,
    silentMs,
    silent,
    ...(r.stoppedAt !== undefined ? { stoppedAt: r.stoppedAt } : {}),
    self: false,
  };
}

function rowOfLive(l: LiveProcess, now: number): ProcessRow {
  const seen = toMs(l.seenAt);
  return {
    id: l.id,
    name: l.address,
    host: '',
    pid: 0,
    roles: l.roles.split(',').filter(Boolean),
    version: '',
    startedAt: 0,
    at: seen,
    status: 'unknown',
    checks: {},
    state: 'unheard',
    silentMs: now - seen,
    silent: false,
    note: `known from Postgres only (its reports are in Redis, which cannot be read); seen ${seconds(now - seen)} ago`,
    self: false,
  };
}

/** The deployment record's row of a report: its id is the report's `host:pid` and a suffix of its own. */
function findLive(live: readonly LiveProcess[], r: ProcessReport): LiveProcess | undefined {
  return live.find((l) => l.id.startsWith(`${r.id}:`));
}

function toMs(t: Date | number): number {
  return typeof t === 'number' ? t : t.getTime();
}

function seconds(ms: number): string {
  return ms < 120_000 ? `${Math.max(0, Math.round(ms / 1000))} s` : `${Math.round(ms / 60_000)} min`;
}
