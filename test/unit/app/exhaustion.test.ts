import { Registry } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EXHAUSTION_SAMPLE_MS, watchExhaustion } from '../../../src/app/exhaustion.js';
import { silentLogger } from '../../../src/core/logger.js';
import type { BizTag } from '../../../src/core/ports.js';
import { DispenserMetrics } from '../../../src/dispenser/metrics.js';

/** One tag with maxLimit 10,000,000 whose counter stands at 1,000,000, handing out 100 IDs/s. */
async function daysLeft(regions?: number): Promise<number> {
  const registry = new Registry();
  const metrics = new DispenserMetrics(registry);
  const tag = { bizTag: 'bounded', mode: 'segment', maxLimit: 10_000_000 } as BizTag;
  const store = { listBiz: async () => [tag], highestAllocated: async () => new Map([['bounded', 1_000_000]]) };
  watchExhaustion({ registry, metrics, store, warnDays: 30, logger: silentLogger, ...(regions === undefined ? {} : { regions }) });
  vi.setSystemTime(0);
  await registry.metrics();
  metrics.issued.inc({ biz_tag: 'bounded', source: 'pool' }, 100 * (EXHAUSTION_SAMPLE_MS / 1000));
  await new Promise((resolve) => setImmediate(resolve)); // one computation per scrape: the next scrape computes again
  vi.setSystemTime(EXHAUSTION_SAMPLE_MS);
  const text = await registry.metrics();
  return Number(/^idmint_tag_days_left\{biz_tag="bounded"\} (\S+)$/m.exec(text)?.[1]);
}

describe('the exhaustion estimate (idmint_tag_days_left)', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('one region: what remains up to maxLimit at the current rate', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    expect(await daysLeft()).toBeCloseTo(9_000_000 / 100 / 86_400, 6);
  });

  it('one of N regions: the region holds one stripe in N of what remains', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const one = await daysLeft();
    expect(await daysLeft(1)).toBeCloseTo(one, 9);
    expect(await daysLeft(4)).toBeCloseTo(one / 4, 9);
  });
});
