import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { runChaos } from '../../chaos/main.js';
import { faultsFor } from '../../chaos/faults.js';
import type { TopologyKind } from '../../chaos/topology.js';
import { ERROR_CODES } from '../../src/core/errors.js';

/**
 * The short chaos run of `npm run chaos` on a topology, and what it must show: no ID handed out
 * twice; every fault kind once, each recovered; every path handing out IDs; every error a
 * documented code or the client's own (the process was down, no answer in time).
 */
export async function expectShortChaosRun(topology: TopologyKind, seed: number, command: string): Promise<void> {
  const outDir = mkdtempSync(join(tmpdir(), `idmint-chaos-${topology}-`));
  const summary = await runChaos({ minutes: 1, seed, outDir, gapSeconds: 2, topology, log: () => undefined, command });
  const report = readFileSync(join(outDir, 'report.md'), 'utf8');
  expect(summary.duplicates).toEqual([]);
  expect(
    summary.faults.filter((f) => f.result !== 'recovered'),
    report,
  ).toEqual([]);
  expect(new Set(summary.faults.map((f) => f.kind))).toEqual(new Set(faultsFor(topology).map((f) => f.kind)));
  expect(report).toContain('**Duplicates: 0**');
  expect(readFileSync(join(outDir, 'chart.svg'), 'utf8')).toMatch(/^<svg[\s\S]*<polyline[\s\S]*<\/svg>$/);
  const json = JSON.parse(readFileSync(join(outDir, 'summary.json'), 'utf8')) as { errors: Record<string, number> };
  const allowed = new Set<string>([...Object.keys(ERROR_CODES), 'CONNECTION', 'CLIENT_TIMEOUT']);
  const unexpected = Object.keys(json.errors).filter((key) => !allowed.has(key.split('\t')[1]!));
  expect(unexpected, JSON.stringify(json.errors)).toEqual([]);
  // The per-path table's row: path, IDs, IDs/s, answers, ... with an IDs cell other than 0.
  for (const path of summary.paths)
    expect(report, `no IDs on ${path}`).toMatch(
      new RegExp(`^\\| ${path.replace(/[()]/g, '\\$&')} \\| (?!0 \\|)[0-9.]+(?: [kM])? \\| [0-9.]+(?: [kM])? \\| \\d+ \\|`, 'm'),
    );
}
