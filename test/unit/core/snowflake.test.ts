import { describe, expect, it } from 'vitest';
import { ClockBackwardsError, type IdmintError } from '../../../src/core/errors.js';
import { createLayout, LEAF_LAYOUT, MIN_TIME_BASED_ID } from '../../../src/core/layout.js';
import { SnowflakeGenerator } from '../../../src/core/snowflake.js';
import { codeOf, ManualClock, memoryLogger } from './helpers.js';
import { expectNoDuplicates } from '../../support/unique.js';
import { issueInTightLoop } from '../../support/generator-scale.js';

describe('SnowflakeGenerator', () => {
  // At a million here; at 10 million in the chaos project (test/chaos/generators-scale.test.ts).
  it('issues a million IDs from a tight loop, strictly increasing, all ≥ 2^53, none repeated', () => {
    issueInTightLoop(1_000_000, 300_000);
  });

  it('starts each millisecond at a random sequence below 100 and waits for the next millisecond on overflow', () => {
    const clock = new ManualClock(Date.now());
    let r = 0.5;
    const gen = new SnowflakeGenerator({ workerId: 1, clock, random: () => r });
    const first = LEAF_LAYOUT.decode(gen.nextId());
    expect(first.sequence).toBe(50);
    r = 0;
    clock.advance(1);
    expect(LEAF_LAYOUT.decode(gen.nextId()).sequence).toBe(0);
    for (let s = 1; s <= 4095; s++) expect(LEAF_LAYOUT.decode(gen.nextId()).sequence).toBe(s);
    // The sequence is spent: the generator must spin on the clock until the millisecond changes.
    const realNow = clock.now.bind(clock);
    let spins = 0;
    clock.now = () => {
      if (++spins === 50) clock.advance(1);
      return realNow();
    };
    const next = LEAF_LAYOUT.decode(gen.nextId());
    expect(spins).toBeGreaterThanOrEqual(50);
    expect(next.delta).toBe(first.delta + 2);
    expect(next.sequence).toBe(0);
  });

  it('follows a forward clock jump', () => {
    const clock = new ManualClock(Date.now());
    const gen = new SnowflakeGenerator({ workerId: 2, clock });
    const a = gen.nextId();
    clock.advance(3_600_000);
    const b = gen.nextId();
    expect(b > a).toBe(true);
    expect(LEAF_LAYOUT.decode(b).timestamp - LEAF_LAYOUT.decode(a).timestamp).toBe(3_600_000);
  });

  it('waits out a 3 ms step back for twice the offset and issues no duplicate', () => {
    const clock = new ManualClock(Date.now());
    const slept: number[] = [];
    const gen = new SnowflakeGenerator({
      workerId: 3,
      clock,
      sleep: (ms) => {
        slept.push(ms);
        clock.advance(ms);
      },
    });
    const ids = [gen.nextId(), gen.nextId()];
    clock.advance(-3);
    ids.push(gen.nextId(), gen.nextId());
    expect(slept).toEqual([6]);
    expectNoDuplicates(ids);
    expect(ids[2]! > ids[1]!).toBe(true);
  });

  it('waits out a real 3 ms step back with the default sleep', () => {
    let offset = 0;
    const clock = { now: () => Date.now() + offset };
    const gen = new SnowflakeGenerator({ workerId: 3, clock });
    const before = gen.nextId();
    offset = -3;
    const after = gen.nextId();
    expect(after > before).toBe(true);
  });

  it('throws CLOCK_BACKWARDS when the clock is still behind after the wait', () => {
    const clock = new ManualClock(Date.now());
    const gen = new SnowflakeGenerator({ workerId: 3, clock, sleep: () => undefined });
    gen.nextId();
    clock.advance(-5);
    expect(codeOf(() => gen.nextId())).toBe('CLOCK_BACKWARDS');
    clock.advance(5);
    expect(gen.nextId() > 0n).toBe(true);
  });

  it('throws CLOCK_BACKWARDS with the offset on a 1 s step back, and recovers when the clock catches up', () => {
    const clock = new ManualClock(Date.now());
    const gen = new SnowflakeGenerator({ workerId: 4, clock, sleep: () => expect.fail('must not wait 1 s out') });
    const a = gen.nextId();
    const last = clock.ms;
    clock.advance(-1000);
    let caught: unknown;
    try {
      gen.nextId();
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ClockBackwardsError);
    expect(caught).toMatchObject({ code: 'CLOCK_BACKWARDS', lastMs: last, nowMs: last - 1000, details: { offsetMs: 1000 } });
    clock.advance(1001);
    expect(gen.nextId() > a).toBe(true);
  });

  it('refuses to start while now - epoch < 2^31 ms, so every ID is ≥ 2^53', () => {
    const safe = LEAF_LAYOUT.epochMs + 2 ** 31;
    expect(codeOf(() => new SnowflakeGenerator({ workerId: 0, clock: new ManualClock(safe - 1) }))).toBe('CLOCK_BACKWARDS');
    const gen = new SnowflakeGenerator({ workerId: 0, clock: new ManualClock(safe), random: () => 0 });
    expect(gen.nextId()).toBe(MIN_TIME_BASED_ID);
  });

  it("refuses to start past the layout's exhaustion and warns when less than a year is left", () => {
    const end = LEAF_LAYOUT.exhaustsAt.getTime();
    expect(codeOf(() => new SnowflakeGenerator({ workerId: 0, clock: new ManualClock(end) }))).toBe('CONFIG_INVALID');
    const { logger, lines } = memoryLogger();
    const clock = new ManualClock(end - 30 * 24 * 3600_000);
    const gen = new SnowflakeGenerator({ workerId: 0, clock, logger });
    expect(lines.some((l) => l.level === 40 && l.component === 'snowflake' && String(l.msg).includes('within a year'))).toBe(true);
    clock.ms = end + 10;
    expect(codeOf(() => gen.nextId())).toBe('CONFIG_INVALID');
    const quiet = memoryLogger();
    new SnowflakeGenerator({ workerId: 0, logger: quiet.logger });
    expect(quiet.lines.some((l) => l.level === 40)).toBe(false);
  });

  it('rejects worker and datacenter ids that do not fit the layout', () => {
    expect(codeOf(() => new SnowflakeGenerator({ workerId: 1024 }))).toBe('WORKER_ID_UNAVAILABLE');
    expect(codeOf(() => new SnowflakeGenerator({ workerId: -1 }))).toBe('WORKER_ID_UNAVAILABLE');
    const layout = createLayout({ timeBits: 41, datacenterBits: 5, workerBits: 5, sequenceBits: 12, epoch: '2015-01-01T00:00:00Z' });
    expect(codeOf(() => new SnowflakeGenerator({ workerId: 31, datacenterId: 32, layout }))).toBe('WORKER_ID_UNAVAILABLE');
    const gen = new SnowflakeGenerator({ workerId: 31, datacenterId: 17, layout });
    expect(layout.decode(gen.nextId())).toMatchObject({ worker: 31, datacenter: 17 });
  });

  it('refuses a negative maxBackwardsMs as a misconfiguration naming the option, and takes undefined as the default', () => {
    expect(() => new SnowflakeGenerator({ workerId: 0, maxBackwardsMs: -1 })).toThrow(
      expect.objectContaining({
        code: 'CONFIG_INVALID',
        field: 'maxBackwardsMs',
        message: expect.stringMatching(/^SnowflakeGenerator: option maxBackwardsMs must be ≥ 0/),
      }),
    );
    const gen = new SnowflakeGenerator({ workerId: 7, maxBackwardsMs: undefined, datacenterId: undefined, layout: undefined });
    expect(gen.layout).toBe(LEAF_LAYOUT);
    expect(gen.datacenterId).toBe(0);
  });

  it('keeps workers apart: IDs of different worker ids never collide in the same milliseconds', () => {
    const clock = new ManualClock(Date.now());
    const gens = [0, 1, 2, 1023].map((workerId) => new SnowflakeGenerator({ workerId, clock, random: () => 0 }));
    const ids: bigint[] = [];
    for (let i = 0; i < 20_000; i++) {
      if (i % 1000 === 0) clock.advance(1);
      for (const g of gens) ids.push(g.nextId());
    }
    expectNoDuplicates(ids);
  });

  it('never repeats an ID under a chaotic clock (stalls, small and large steps back, jumps)', () => {
    let seed = 42;
    const rand = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const clock = new ManualClock(Date.now());
    const gen = new SnowflakeGenerator({ workerId: 9, clock, random: rand, sleep: (ms) => clock.advance(Math.floor(rand() * ms * 2)) });
    const ids: bigint[] = [];
    let refused = 0;
    for (let i = 0; i < 300_000; i++) {
      const r = rand();
      if (r < 0.001) clock.advance(-Math.ceil(rand() * 5));
      else if (r < 0.0012) clock.advance(-1000);
      else if (r < 0.0014) clock.advance(60_000);
      else if (r < 0.1) clock.advance(1);
      try {
        ids.push(gen.nextId());
      } catch (err) {
        expect((err as IdmintError).code).toBe('CLOCK_BACKWARDS');
        refused++;
        clock.advance(Math.ceil(rand() * 1200));
      }
    }
    expect(refused).toBeGreaterThan(0);
    expectNoDuplicates(ids);
    for (let i = 1; i < ids.length; i++) if (ids[i]! <= ids[i - 1]!) expect.fail(`not increasing at ${i}`);
  });

  it('never repeats an ID across concurrent async callers while the clock stalls and steps back', async () => {
    let offset = 0;
    const clock = { now: () => Date.now() + offset };
    const gen = new SnowflakeGenerator({ workerId: 10, clock });
    const ids: bigint[] = [];
    let refused = 0;
    const caller = async (k: number): Promise<void> => {
      for (let round = 0; round < 200; round++) {
        if ((round + k) % 37 === 0) offset -= 2;
        if ((round + k) % 97 === 0) offset -= 2000;
        try {
          ids.push(...gen.nextIds(1 + ((round * 7 + k) % 500)));
        } catch (err) {
          expect((err as IdmintError).code).toBe('CLOCK_BACKWARDS');
          refused++;
          offset += 2100;
        }
        await new Promise((resolve) => setImmediate(resolve));
      }
    };
    await Promise.all(Array.from({ length: 8 }, (_, k) => caller(k)));
    expect(refused).toBeGreaterThan(0);
    expect(ids.length).toBeGreaterThan(100_000);
    expectNoDuplicates(ids);
  }, 60_000);

  it('batches with nextIds', () => {
    const gen = new SnowflakeGenerator({ workerId: 5 });
    const ids = gen.nextIds(10_000);
    expect(ids).toHaveLength(10_000);
    expectNoDuplicates(ids);
    expect(codeOf(() => gen.nextIds(-1))).toBe('BAD_REQUEST');
  });
});
