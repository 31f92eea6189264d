import { describe, expect, it } from 'vitest';
import { Ledger } from '../../chaos/ledger.js';

// The chaos harness's duplicate check at the size of a 30-minute run: a long proof (tens of
// seconds), so it runs in the chaos project, not in the unit tier.
describe('chaos ledger at the size of a long run', () => {
  it('checks 150 million ranges (more than a JS array can index) and still finds a planted overlap', () => {
    const ledger = new Ledger();
    const n = 150_000_000;
    // Straight into the typed arrays: 150 M calls of record() would only slow the test.
    const ranges = (ledger as unknown as { tags: Map<string, { push(s: bigint, e: bigint, o: number): void }> }).tags;
    ledger.record('http-ids', 'big', 'pool', [[0n, 0n]], 1);
    const big = ranges.get('big')!;
    for (let i = 1; i < n; i++) big.push(BigInt(i * 3), BigInt(i * 3 + 1), 0);
    expect(ledger.duplicates()).toEqual([]);
    ledger.record('kafka-request', 'big', 'pool', [[BigInt(n * 3 - 2), BigInt(n * 3 + 10)]], 1);
    const found = ledger.duplicates();
    expect(found).toHaveLength(1);
    expect(found[0]).toContain(`ID ${n * 3 - 2} is in 2 ranges`);
    expect(found[0]).toContain('kafka-request');
  }, 300_000);
});
