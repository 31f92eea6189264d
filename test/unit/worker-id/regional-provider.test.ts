import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { makeDecoder } from '../../../src/core/decode.js';
import { LEAF_LAYOUT, UID_LAYOUT } from '../../../src/core/layout.js';
import type { BizTag } from '../../../src/core/ports.js';
import { regionalWorkerIds, regionLayout } from '../../../src/core/region.js';
import { createSnowflakeSource } from '../../../src/dispenser/sources/snowflake.js';
import { RegionalWorkerIdProvider } from '../../../src/worker-id/regional-provider.js';
import { StaticWorkerIdProvider } from '../../../src/worker-id/static-provider.js';
import { workerIdProviderFromConfig } from '../../../src/app/worker-id.js';
import { expectNoDuplicates } from '../../support/unique.js';

describe('worker ids of several regions', () => {
  it('the region sits in the high bits: every (region, local) pair has its own worker id, inside the layout, and gives its region back', () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 64 }), fc.integer({ min: 7, max: 22 }), fc.nat(), fc.nat(), (regions, workerBits, r, l) => {
        const maxWorkerId = 2 ** workerBits - 1;
        const region = r % regions;
        const ids = regionalWorkerIds({ regions, region }, maxWorkerId);
        const local = l % (ids.maxLocal + 1);
        const worker = ids.workerId(local);
        expect(worker).toBeGreaterThanOrEqual(0);
        expect(worker).toBeLessThanOrEqual(maxWorkerId);
        expect(ids.regionOf(worker)).toBe(region);
        // Another region's range never holds it.
        const other = regionalWorkerIds({ regions, region: (region + 1) % regions }, maxWorkerId);
        expect(worker < other.workerId(0) || worker > other.workerId(other.maxLocal)).toBe(true);
      }),
    );
    // Leaf's 10 worker bits: 512 workers per region with 2 regions, 128 with 8 (3 region bits + 7).
    expect(regionalWorkerIds({ regions: 2, region: 1 }, LEAF_LAYOUT.maxWorkerId)).toMatchObject({ maxLocal: 511 });
    expect(regionalWorkerIds({ regions: 8, region: 7 }, LEAF_LAYOUT.maxWorkerId).workerId(127)).toBe(1023);
    expect(regionalWorkerIds({ regions: 5, region: 4 }, LEAF_LAYOUT.maxWorkerId).workerId(0)).toBe(512);
  });

  it('two regions whose registries both hand out worker 0 still issue different Snowflake IDs, and decode names each region', async () => {
    const [a, b] = await Promise.all(
      [0, 1].map((region) => createSnowflakeSource({ provider: new RegionalWorkerIdProvider(new StaticWorkerIdProvider(0), regionLayout(2, region)) })),
    );
    expect([a!.lease.workerId, b!.lease.workerId]).toEqual([0, 512]);
    const ids = [...a!.nextIds(5000), ...b!.nextIds(5000)].map(String);
    expectNoDuplicates(ids);
    const decode = makeDecoder({ snowflake: LEAF_LAYOUT, uid: UID_LAYOUT, region: { regions: 2, stripe: 1_000_000 } });
    const tag = { bizTag: 'sf', mode: 'snowflake' } as BizTag;
    expect(decode(BigInt(ids[0]!), tag)).toMatchObject({ type: 'snowflake', worker: 0, region: 0 });
    expect(decode(BigInt(ids[9999]!), tag)).toMatchObject({ type: 'snowflake', worker: 512, region: 1 });
    // Segment IDs: the region of their stripe.
    const segment = { bizTag: 's', mode: 'segment' } as BizTag;
    expect(decode(1_000_000n, segment)).toMatchObject({ type: 'segment', region: 0 });
    expect(decode(1_000_001n, segment)).toMatchObject({ type: 'segment', region: 1 });
    // Without regions, decode says nothing of them.
    expect(makeDecoder()(1_000_001n, segment)).not.toHaveProperty('region');
    await a!.close();
    await b!.close();
  });

  it("a local id past the region's part, or a layout too narrow for the regions, is refused", async () => {
    await expect(new RegionalWorkerIdProvider(new StaticWorkerIdProvider(512), regionLayout(2, 0)).acquire({ maxWorkerId: 1023 })).rejects.toMatchObject({
      code: 'WORKER_ID_UNAVAILABLE',
    });
    await expect(new RegionalWorkerIdProvider(new StaticWorkerIdProvider(0), regionLayout(4, 3)).acquire({ maxWorkerId: 3 })).rejects.toThrow(
      /a worker field of 2 bits cannot hold 4 regions/,
    );
  });

  it('IDMINT_REGIONS wraps whichever provider the config names', async () => {
    const base = {
      IDMINT_DATA_DIR: '/tmp/x',
      IDMINT_HOST: '127.0.0.1',
      IDMINT_PORT: 8080,
      IDMINT_WORKER_ID_PROVIDER: 'auto' as const,
      IDMINT_POOL_KEY_PREFIX: '',
      IDMINT_PROCESSES: 1,
      IDMINT_WORKER_ID_LEASE_MS: 10_000,
      IDMINT_WORKER_ID_WAIT_MS: 60_000,
    };
    const provider = await workerIdProviderFromConfig({ ...base, IDMINT_WORKER_ID: 3, IDMINT_REGIONS: 4, IDMINT_REGION: 2 });
    expect(provider).toBeInstanceOf(RegionalWorkerIdProvider);
    const lease = await provider.acquire({ maxWorkerId: LEAF_LAYOUT.maxWorkerId });
    expect(lease).toMatchObject({ workerId: 2 * 256 + 3, provider: 'static' });
    await lease.close();
  });
});
