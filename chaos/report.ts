import { CALM_AFTER_MS, type Ledger } from './ledger.js';

export interface FaultRecord {
  kind: string;
  what: string;
  startSecond: number;
  seconds: number;
  result: string;
  /** With several regions: the region whose roles took the fault (the servers are shared). */
  region?: number;
}

export interface ChaosSummary {
  seed: number;
  topology: 'single' | 'ha';
  /** Regions side by side (1: one). */
  regions?: number;
  seconds: number;
  total: number;
  faults: FaultRecord[];
  duplicates: string[];
  paths: string[];
}

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
}

const fmt = (n: number): string => (Number.isNaN(n) ? '—' : n >= 100 ? n.toFixed(0) : n.toFixed(1));
const rate = (n: number): string => (n >= 1e6 ? `${(n / 1e6).toFixed(2)} M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)} k` : n.toFixed(0));
const row = (cells: Array<string | number>): string => `| ${cells.join(' | ')} |`;
const table = (headers: string[], rows: Array<Array<string | number>>): string => [row(headers), row(headers.map(() => '---')), ...rows.map(row)].join('\n');

export const NOT_INJECTED = [
  "A clock step of the whole machine: the clock faults step one process's clock through its test hook (IDMINT_TEST_CLOCK_FILE), never the machine's.",
];

export function reportMarkdown(s: ChaosSummary, ledger: Ledger, command: string): string {
  const bySource = [...ledger.bySource.entries()].sort().map(([key, n]) => [...key.split('\t'), rate(n)]);
  const errors = [...ledger.errors.entries()].sort().map(([key, n]) => [...key.split('\t'), n]);
  const phaseNames = ['baseline', ...s.faults.map((f) => f.kind), 'after the last fault'];
  const phases = ledger.phases.map((p, i) => {
    const end = ledger.phases[i + 1]?.startedAt ?? ledger.startedAt + s.seconds * 1000;
    const secs = Math.max(0.001, (end - p.startedAt) / 1000);
    const ids = [...p.ids.values()].reduce((a, b) => a + b, 0);
    const lat = [...p.latencies.values()].flat().sort((a, b) => a - b);
    const errs = [...p.errors.values()].reduce((a, b) => a + b, 0);
    return [i, phaseNames[i] ?? `phase ${i}`, secs.toFixed(1), rate(ids / secs), lat.length, fmt(percentile(lat, 0.5)), fmt(percentile(lat, 0.99)), errs];
  });
  const perPath = s.paths.map((path) => {
    const lat = ledger.phases.flatMap((p) => p.latencies.get(path) ?? []).sort((a, b) => a - b);
    const ids = ledger.phases.reduce((sum, p) => sum + (p.ids.get(path) ?? 0), 0);
    const calm = [...(ledger.calm.get(path) ?? [])].sort((a, b) => a - b);
    return [
      path,
      rate(ids),
      rate(ids / s.seconds),
      lat.length,
      fmt(percentile(lat, 0.5)),
      fmt(percentile(lat, 0.99)),
      calm.length,
      calm.length ? fmt(percentile(calm, 0.99)) : '—',
    ];
  });
  return [
    '# Chaos run report',
    '',
    `\`${command}\` — ${(s.regions ?? 1) > 1 ? `${s.regions} regions side by side on the same servers (each its own schema, key prefix, queue and Kafka namespace: request topic, pool topics and groups; one ledger, so a repeat across regions counts); ` : ''}${s.topology === 'ha' ? 'every server replicated: three Kafka brokers, a ZooKeeper ensemble of three, Redis with two replicas under three Sentinels, Postgres as three nodes under Patroni (asynchronous replication, the segment fence in ZooKeeper); ' : ''}seed ${s.seed}, ${(s.seconds / 60).toFixed(1)} minutes, ${s.faults.length} faults, ${rate(s.total)} IDs (${rate(s.total / s.seconds)} IDs/s on average).`,
    '',
    `**Duplicates: ${s.duplicates.length}**${s.duplicates.length ? `\n\n${s.duplicates.map((d) => `- ${d}`).join('\n')}` : ''}`,
    '',
    '![IDs/s per path over time, faults marked](chart.svg)',
    '',
    '## IDs per path and source',
    '',
    table(['path', 'source', 'IDs'], bySource),
    '',
    '## Latency and rate per path (whole run; one sample per answer)',
    '',
    `Outside faults: answers completed while no fault was being injected, from ${CALM_AFTER_MS / 1000} s after each fault recovered until the next began.`,
    '',
    table(['path', 'IDs', 'IDs/s', 'answers', 'p50 ms', 'p99 ms', 'answers outside faults', 'p99 ms outside faults'], perPath),
    '',
    '## Faults',
    '',
    table(
      ['#', 'at s', 'lasted s', 'kind', 'what', 'result'],
      s.faults.map((f, i) => [
        i + 1,
        f.startSecond,
        f.seconds.toFixed(1),
        f.region === undefined ? f.kind : `${f.kind} (region ${f.region})`,
        f.what,
        f.result,
      ]),
    ),
    '',
    '## Phases (from each fault to the next)',
    '',
    table(['phase', 'started by', 'seconds', 'IDs/s', 'answers', 'p50 ms', 'p99 ms', 'errors'], phases),
    '',
    '## Errors by path and code',
    '',
    errors.length ? table(['path', 'code', 'count'], errors) : 'None.',
    '',
    "Client-side codes: `CONNECTION` (refused or reset: the process was down), `CLIENT_TIMEOUT` (no answer within 5 s), `TIMEOUT` (the Kafka client gave up); the rest are the server's documented codes.",
    '',
    '## Not injected',
    '',
    ...NOT_INJECTED.map((n) => `- ${n}`),
    '',
  ].join('\n');
}
