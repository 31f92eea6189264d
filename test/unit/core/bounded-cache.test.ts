import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BoundedCache } from '../../../src/core/bounded-cache.js';

/** A source whose value per key is a version the test bumps; each load is held until released. */
class Source {
  version = 0;
  loads = 0;
  failing = false;
  private waiting: Array<() => void> = [];
  load = (): Promise<number> => {
    this.loads++;
    const version = this.version;
    const failing = this.failing;
    return new Promise((resolve, reject) => this.waiting.push(() => (failing ? reject(new Error('down')) : resolve(version))));
  };
  release(): void {
    for (const w of this.waiting.splice(0)) w();
  }
}

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('BoundedCache', () => {
  it('shares one load among concurrent callers, and answers at once within the bound', async () => {
    const t = { now: 0 };
    const source = new Source();
    const cache = new BoundedCache<number>({ load: source.load, boundMs: 1000, clock: { now: () => t.now } });
    const pending = Array.from({ length: 50 }, () => cache.get('k'));
    source.release();
    expect(await Promise.all(pending)).toEqual(Array(50).fill(0));
    expect(source.loads).toBe(1);
    t.now = 499;
    expect(cache.peek('k')).toBe(0);
    expect(source.loads).toBe(1);
  });

  it('past half the bound a hit starts one background reload; past the bound nothing is answered from the old value', async () => {
    const t = { now: 0 };
    const source = new Source();
    const cache = new BoundedCache<number>({ load: source.load, boundMs: 1000, clock: { now: () => t.now } });
    const first = cache.get('k');
    source.release();
    await first;
    t.now = 600;
    for (let i = 0; i < 10; i++) expect(cache.peek('k')).toBe(0);
    expect(source.loads).toBe(2);
    source.version = 1;
    t.now = 2000; // the reload has not landed and the value is 2 s old
    expect(cache.peek('k')).toBeUndefined();
    const waited = cache.get('k');
    source.release();
    expect(await waited).toBe(1);
  });

  it('an invalidation drops a load under way and the old value: the next caller reads anew', async () => {
    const source = new Source();
    const cache = new BoundedCache<number>({ load: source.load, boundMs: 1000, clock: { now: () => 0 } });
    const first = cache.get('k');
    cache.invalidate('k');
    source.version = 7;
    source.release();
    await first;
    const next = cache.get('k');
    await flush();
    source.release();
    expect(await next).toBe(7);
  });

  it('while the source fails the last value applies without a wait per caller, and one retry at a time keeps trying', async () => {
    const t = { now: 0 };
    const source = new Source();
    const failures: unknown[] = [];
    const cache = new BoundedCache<number>({ load: source.load, boundMs: 1000, clock: { now: () => t.now }, onFailed: (_k, err) => failures.push(err) });
    const first = cache.get('k');
    source.release();
    await first;
    source.failing = true;
    t.now = 5000;
    const waited = cache.get('k');
    source.release();
    expect(await waited).toBe(0);
    expect(failures).toHaveLength(1);
    const loads = source.loads;
    for (let i = 0; i < 100; i++) expect(cache.peek('k')).toBe(0);
    expect(source.loads).toBe(loads);
    t.now = 7000;
    expect(cache.peek('k')).toBe(0);
    expect(source.loads).toBe(loads + 1);
  });

  it('property: with the source answering, no caller ever gets a value read more than boundMs before', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.record({ step: fc.integer({ min: 0, max: 700 }), bump: fc.boolean() }), { minLength: 1, maxLength: 60 }), async (steps) => {
        const t = { now: 0 };
        let version = 0;
        /** When each version was written. */
        const writtenAt = [0];
        const cache = new BoundedCache<number>({ load: async () => version, boundMs: 1000, clock: { now: () => t.now } });
        for (const { step, bump } of steps) {
          t.now += step;
          if (bump) {
            version++;
            writtenAt.push(t.now);
          }
          const got = await cache.get('k');
          // The value answered was current at most boundMs ago: no newer version is older than that.
          const superseded = writtenAt[got + 1];
          if (superseded !== undefined) expect(t.now - superseded).toBeLessThan(1000);
        }
      }),
      { numRuns: 300 },
    );
  });
});
