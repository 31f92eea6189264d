import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { IdmintError } from '../../../src/core/errors.js';
import { parseId, createLayout, createUidLayout, LEAF_LAYOUT, MIN_TIME_BASED_ID, UID_LAYOUT, type LayoutOptions } from '../../../src/core/layout.js';
import { createShardedLayout, SHARDED_LAYOUT } from '../../../src/core/sharded.js';

const NOW = Date.now();

/** Valid splits: sum 63, time range inside the Date range, epoch in the past. */
const validLayout = fc
  .record({
    sequenceBits: fc.integer({ min: 1, max: 31 }),
    workerBits: fc.integer({ min: 0, max: 31 }),
    datacenterBits: fc.integer({ min: 0, max: 31 }),
    timeUnit: fc.constantFrom('ms' as const, 's' as const),
    epoch: fc.integer({ min: 0, max: NOW - 1 }),
  })
  .map((o) => ({ ...o, timeBits: 63 - o.sequenceBits - o.workerBits - o.datacenterBits }))
  .filter((o) => o.timeBits >= 1 && o.timeBits <= (o.timeUnit === 'ms' ? 52 : 42))
  .map((o): LayoutOptions => o);

function expectRefused(fn: () => unknown, code = 'BAD_REQUEST'): void {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(IdmintError);
    expect((err as IdmintError).code).toBe(code);
    return;
  }
  expect.fail(`expected ${code}`);
}

describe('Layout', () => {
  it('round-trips random fields through encode/decode for random valid layouts', () => {
    fc.assert(
      fc.property(validLayout, fc.double({ min: 0, max: 1, noNaN: true }), fc.nat(), fc.nat(), fc.nat(), fc.nat(999), (opts, t, dc, w, s, subMs) => {
        const layout = createLayout(opts);
        const delta = Math.floor(t * layout.maxDelta);
        const fields = {
          timestamp: layout.epochMs + delta * layout.unitMs + (layout.unitMs === 1 ? 0 : subMs),
          datacenter: dc % (layout.maxDatacenterId + 1),
          worker: w % (layout.maxWorkerId + 1),
          sequence: s % (layout.maxSequence + 1),
        };
        const id = layout.encode(fields);
        expect(id >= 0n && id < 1n << 63n).toBe(true);
        const d = layout.decode(id);
        expect(d.delta).toBe(delta);
        expect(d.timestamp).toBe(layout.epochMs + delta * layout.unitMs);
        expect(d.time).toBe(new Date(d.timestamp).toISOString());
        expect(d.worker).toBe(fields.worker);
        expect(d.sequence).toBe(fields.sequence);
        expect(d.datacenter).toBe(layout.datacenterBits > 0 ? fields.datacenter : undefined);
        expect(d.id).toBe(id.toString());
      }),
      { numRuns: 500 },
    );
  });

  it('decodes then re-encodes any 63-bit id to itself', () => {
    fc.assert(
      fc.property(validLayout, fc.bigInt({ min: 0n, max: (1n << 63n) - 1n }), (opts, id) => {
        const layout = createLayout(opts);
        expect(layout.encode(layout.decode(id))).toBe(id);
      }),
      { numRuns: 500 },
    );
  });

  it('rejects splits that do not sum to 63', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 53 }), fc.integer({ min: 0, max: 31 }), fc.integer({ min: 1, max: 31 }), (timeBits, workerBits, sequenceBits) => {
        fc.pre(timeBits + workerBits + sequenceBits !== 63);
        expectRefused(() => createLayout({ timeBits, workerBits, sequenceBits, epoch: 0 }), 'CONFIG_INVALID');
      }),
    );
  });

  it('rejects negative, fractional and oversized fields, future epochs and unknown units as a misconfiguration naming the option', () => {
    expect(() => createLayout({ timeBits: 41, workerBits: 10, sequenceBits: 12, epoch: NOW + 60_000 })).toThrow(
      expect.objectContaining({ field: 'epoch', message: expect.stringMatching(/^layout: option epoch must lie in the past/) }),
    );
    expectRefused(() => createLayout({ timeBits: 42, workerBits: 11, sequenceBits: 12, datacenterBits: -2, epoch: 0 }), 'CONFIG_INVALID');
    expectRefused(() => createLayout({ timeBits: 41.5, workerBits: 9.5, sequenceBits: 12, epoch: 0 }), 'CONFIG_INVALID');
    expectRefused(() => createLayout({ timeBits: 0, workerBits: 31, sequenceBits: 31, datacenterBits: 1, epoch: 0 }), 'CONFIG_INVALID');
    expectRefused(() => createLayout({ timeBits: 41, workerBits: 10, sequenceBits: 12, epoch: NOW + 60_000 }), 'CONFIG_INVALID');
    expectRefused(() => createLayout({ timeBits: 41, workerBits: 10, sequenceBits: 12, epoch: 'not a date' }), 'CONFIG_INVALID');
    expectRefused(() => createLayout({ timeBits: 41, workerBits: 10, sequenceBits: 12, epoch: 0, timeUnit: 'us' as 'ms' }), 'CONFIG_INVALID');
    // 53 bits of seconds runs far past the last valid Date.
    expectRefused(() => createLayout({ timeBits: 50, workerBits: 1, sequenceBits: 12, epoch: 0, timeUnit: 's' }), 'CONFIG_INVALID');
  });

  it('rejects fields that do not fit on encode, and ids outside 63 bits on decode', () => {
    const t = LEAF_LAYOUT.epochMs + 1000;
    expectRefused(() => LEAF_LAYOUT.encode({ timestamp: t, worker: 1024, sequence: 0 }));
    expectRefused(() => LEAF_LAYOUT.encode({ timestamp: t, worker: 0, sequence: 4096 }));
    expectRefused(() => LEAF_LAYOUT.encode({ timestamp: LEAF_LAYOUT.epochMs - 1, worker: 0, sequence: 0 }));
    expectRefused(() => LEAF_LAYOUT.encode({ timestamp: LEAF_LAYOUT.exhaustsAt.getTime(), worker: 0, sequence: 0 }));
    expectRefused(() => LEAF_LAYOUT.decode(-1n));
    expectRefused(() => LEAF_LAYOUT.decode(1n << 63n));
  });

  it("builds Leaf's layout with its epoch and reports when its time bits run out", () => {
    expect(LEAF_LAYOUT.toJSON()).toMatchObject({ name: 'leaf', timeBits: 41, workerBits: 10, sequenceBits: 12, epoch: '2010-11-04T01:42:54.657Z' });
    expect(LEAF_LAYOUT.exhaustsAt.getTime()).toBe(Date.parse('2010-11-04T01:42:54.657Z') + 2 ** 41);
    // Leaf composes (ms since epoch << 22) | (worker << 12) | sequence.
    const ms = 1_700_000_000_000;
    const expected = (BigInt(ms - LEAF_LAYOUT.epochMs) << 22n) | (7n << 12n) | 42n;
    expect(LEAF_LAYOUT.encode({ timestamp: ms, worker: 7, sequence: 42 })).toBe(expected);
    expect(LEAF_LAYOUT.decode(expected)).toMatchObject({ time: new Date(ms).toISOString(), worker: 7, sequence: 42, layout: 'leaf' });
    // Invariant 4: 2^31 ms after the epoch is the first instant whose IDs are all ≥ 2^53.
    expect(LEAF_LAYOUT.safeFrom.getTime()).toBe(LEAF_LAYOUT.epochMs + 2 ** 31);
    expect(LEAF_LAYOUT.encode({ timestamp: LEAF_LAYOUT.safeFrom.getTime(), worker: 0, sequence: 0 })).toBe(MIN_TIME_BASED_ID);
  });

  it("builds uid-generator's layout on a 2025 epoch; its own 2016 epoch ran out in November 2024", () => {
    expect(UID_LAYOUT.toJSON()).toMatchObject({
      name: 'uid',
      timeBits: 28,
      workerBits: 22,
      sequenceBits: 13,
      timeUnit: 's',
      epoch: '2025-01-01T00:00:00.000Z',
    });
    expect(UID_LAYOUT.exhaustsAt.toISOString()).toBe(new Date(Date.parse('2025-01-01T00:00:00Z') + 2 ** 28 * 1000).toISOString());
    expect(createUidLayout('2016-05-20T00:00:00Z').exhaustsAt.toISOString().slice(0, 10)).toBe('2024-11-20');
    const id = UID_LAYOUT.encode({ timestamp: Date.parse('2026-01-02T03:04:05.678Z'), worker: 4_000_000, sequence: 8191 });
    expect(UID_LAYOUT.decode(id)).toMatchObject({ time: '2026-01-02T03:04:05.000Z', worker: 4_000_000, sequence: 8191 });
  });

  it('supports a datacenter + worker split', () => {
    const layout = createLayout({ name: 'dc', timeBits: 41, datacenterBits: 5, workerBits: 5, sequenceBits: 12, epoch: '2020-01-01T00:00:00Z' });
    const id = layout.encode({ timestamp: Date.parse('2024-01-01T00:00:00Z'), datacenter: 31, worker: 3, sequence: 9 });
    expect(layout.decode(id)).toMatchObject({ datacenter: 31, worker: 3, sequence: 9, time: '2024-01-01T00:00:00.000Z' });
    expectRefused(() => layout.encode({ timestamp: Date.parse('2024-01-01T00:00:00Z'), datacenter: 32, worker: 3, sequence: 9 }));
  });

  it('parses IDs from decimal strings and refuses anything else', () => {
    expect(parseId('9223372036854775807')).toBe((1n << 63n) - 1n);
    expect(parseId('0')).toBe(0n);
    expect(parseId(42)).toBe(42n);
    expect(parseId(7n)).toBe(7n);
    for (const bad of ['9223372036854775808', '-1', '1e5', ' 12', '', '0x10', '12345678901234567890', 1.5, -3]) {
      expectRefused(() => parseId(bad));
    }
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: (1n << 63n) - 1n }), (id) => {
        expect(parseId(id.toString())).toBe(id);
      }),
    );
  });

  it('is frozen', () => {
    expect(Object.isFrozen(LEAF_LAYOUT)).toBe(true);
  });
});

describe('ShardedLayout', () => {
  it('round-trips random fields for random valid splits', () => {
    const split = fc
      .record({ sequenceBits: fc.integer({ min: 1, max: 49 }), shardBits: fc.integer({ min: 0, max: 16 }), appBits: fc.integer({ min: 0, max: 16 }) })
      .filter((o) => o.sequenceBits + o.shardBits + o.appBits <= 63);
    fc.assert(
      fc.property(split, fc.double({ min: 0, max: 1, noNaN: true }), fc.nat(), fc.nat(), (opts, t, shard, app) => {
        const layout = createShardedLayout(opts);
        const fields = { sequence: Math.floor(t * layout.maxSequence), shard: shard % (layout.maxShard + 1), app: app % (layout.maxApp + 1) };
        const d = layout.decode(layout.encode(fields));
        expect({ sequence: d.sequence, shard: d.shard, app: d.app }).toEqual(fields);
      }),
    );
  });

  it('defaults to sequence | 6 shard | 8 app with IDs below 2^53', () => {
    expect(SHARDED_LAYOUT).toMatchObject({ sequenceBits: 39, shardBits: 6, appBits: 8, safeAsNumber: true });
    expect(SHARDED_LAYOUT.encodeNumber({ sequence: 1, shard: 2, app: 3 })).toBe((1 << 14) + (2 << 8) + 3);
    expect(SHARDED_LAYOUT.encode({ sequence: SHARDED_LAYOUT.maxSequence, shard: 63, app: 255 })).toBe(2n ** 53n - 1n);
    expect(SHARDED_LAYOUT.decode(16_899)).toMatchObject({ sequence: 1, shard: 2, app: 3 });
  });

  it('rejects invalid splits and fields', () => {
    // A split is configuration: the operator's to fix, not a caller's 400.
    expectRefused(() => createShardedLayout({ sequenceBits: 0 }), 'CONFIG_INVALID');
    expectRefused(() => createShardedLayout({ sequenceBits: 49, shardBits: 16, appBits: 16 }), 'CONFIG_INVALID');
    expectRefused(() => SHARDED_LAYOUT.encode({ sequence: 0, shard: 64, app: 0 }));
    expectRefused(() => SHARDED_LAYOUT.decode(2n ** 53n));
    expectRefused(() => createShardedLayout({ sequenceBits: 49 }).encodeNumber({ sequence: 1, shard: 0, app: 0 }));
  });
});
