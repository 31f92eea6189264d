import { describe, expect, it } from 'vitest';
import { CALM_AFTER_MS, Ledger } from '../../../chaos/ledger.js';

describe('chaos ledger', () => {
  it('finds overlapping ranges within a tag, names both origins, and ignores other tags', () => {
    const ledger = new Ledger();
    ledger.record('http-blocks', 'a', 'pool', [[1n, 100n]], 1);
    ledger.record(
      'http-ids',
      'a',
      'segment',
      [
        [101n, 101n],
        [150n, 150n],
      ],
      1,
    );
    ledger.record('http-ids', 'b', 'segment', [[50n, 50n]], 1);
    expect(ledger.duplicates()).toEqual([]);
    ledger.record('kafka-request', 'a', 'pool', [[100n, 100n]], 1);
    const found = ledger.duplicates();
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(/^a: .*kafka-request.*http-blocks|^a: .*http-blocks.*kafka-request/);
  });

  it('keeps latencies outside fault windows apart: none while a fault runs or within CALM_AFTER_MS of its end', () => {
    const ledger = new Ledger();
    ledger.record('p', 'a', 'pool', [[1n, 1n]], 1);
    ledger.faultStarted();
    ledger.record('p', 'a', 'pool', [[2n, 2n]], 2000);
    ledger.faultEnded();
    ledger.record('p', 'a', 'pool', [[3n, 3n]], 900);
    ledger.faultEnded(Date.now() - CALM_AFTER_MS);
    ledger.record('p', 'a', 'pool', [[4n, 4n]], 3);
    expect(ledger.calm.get('p')).toEqual([1, 3]);
    expect(ledger.phases.flatMap((ph) => ph.latencies.get('p') ?? [])).toEqual([1, 2000, 900, 3]);
  });

  // The size of a long run (150 M ranges) is the chaos project's proof: test/chaos/ledger-scale.test.ts.
  it('checks many ranges recorded out of order', () => {
    const ledger = new Ledger();
    const ranges: Array<[bigint, bigint]> = [];
    for (let i = 0; i < 300_000; i++) ranges.push([BigInt(i * 2), BigInt(i * 2)]);
    ledger.record('http-ids', 't', 'pool', ranges.reverse(), 1);
    expect(ledger.duplicates()).toEqual([]);
  });
});

describe('chaos ledger: consecutive IDs', () => {
  it('keeps one range for one origin counting up, and still finds an ID handed out twice in a row', () => {
    const ledger = new Ledger();
    const one = Array.from({ length: 100_000 }, (_, i) => [BigInt(i + 1), BigInt(i + 1)] as [bigint, bigint]);
    ledger.record('sdk-http (2 servers)', 's', 'sdk', one, 1);
    const ranges = (ledger as unknown as { tags: Map<string, { length: number }> }).tags.get('s')!;
    expect(ranges.length).toBe(1);
    expect(ledger.duplicates()).toEqual([]);
    ledger.record(
      'sdk-http (2 servers)',
      's',
      'sdk',
      [
        [100_001n, 100_001n],
        [100_001n, 100_001n],
      ],
      1,
    );
    expect(ledger.duplicates()).toHaveLength(1);
  });
});
