import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runChaos } from '../../chaos/main.js';
import { FAULTS } from '../../chaos/faults.js';
import { ERROR_CODES } from '../../src/core/errors.js';

/**
 * The short chaos run of `npm run chaos`: the topology (2 api, 2 responders, 2 refill workers)
 * on private Kafka, ZooKeeper, Redis and Postgres, load through every path at once, every fault
 * kind once. No ID is handed out twice; every fault recovers; every path hands out IDs; every
 * error is a documented code or the client's own (the process was down, no answer in time).
 */
describe('chaos, short run', () => {
  it('every fault kind once under load on every path: zero duplicates', { timeout: 600_000 }, async () => {
    const outDir = mkdtempSync(join(tmpdir(), 'idmint-chaos-'));
    const summary = await runChaos({ minutes: 1, seed: 20261123, outDir, gapSeconds: 2, log: () => undefined, command: 'test/e2e/chaos.test.ts' });
    expect(summary.duplicates).toEqual([]);
    expect(summary.faults.map((f) => f.result).filter((r) => r !== 'recovered')).toEqual([]);
    expect(new Set(summary.faults.map((f) => f.kind))).toEqual(new Set(FAULTS.map((f) => f.kind)));
    const report = readFileSync(join(outDir, 'report.md'), 'utf8');
    expect(report).toContain('**Duplicates: 0**');
    expect(readFileSync(join(outDir, 'chart.svg'), 'utf8')).toMatch(/^<svg[\s\S]*<polyline[\s\S]*<\/svg>$/);
    const json = JSON.parse(readFileSync(join(outDir, 'summary.json'), 'utf8')) as { errors: Record<string, number> };
    const allowed = new Set<string>([...Object.keys(ERROR_CODES), 'CONNECTION', 'CLIENT_TIMEOUT']);
    const unexpected = Object.keys(json.errors).filter((key) => !allowed.has(key.split('\t')[1]!));
    expect(unexpected, JSON.stringify(json.errors)).toEqual([]);
    for (const path of summary.paths) expect(report, `no IDs on ${path}`).toMatch(new RegExp(`\\| ${path.replace(/[()]/g, '\\$&')} \\| [^|]+ \\| [0-9.]+ ?[kM]? \\|`));
  });
});
