import { describe, expect, it } from 'vitest';
import { fenceRoot } from '../../../src/app/fence.js';

// Deployments and regions may share a ZooKeeper; their counters are not each other's, so neither
// are their fence marks (a shared mark made one region's counter look rewound to the other).
describe('fenceRoot', () => {
  it('is /idmint/fence by default, and a path of its own per schema and per region but region 0 (its marks survive regions apply)', () => {
    expect(fenceRoot({})).toBe('/idmint/fence');
    expect(fenceRoot({ IDMINT_PG_SCHEMA: 'prod' })).toBe('/idmint/schemas/prod/fence');
    expect(fenceRoot({ IDMINT_REGIONS: 2, IDMINT_REGION: 1 })).toBe('/idmint/regions/1/fence');
    expect(fenceRoot({ IDMINT_PG_SCHEMA: 'prod', IDMINT_REGIONS: 3, IDMINT_REGION: 2 })).toBe('/idmint/schemas/prod/regions/2/fence');
    expect(fenceRoot({ IDMINT_PG_SCHEMA: 'prod', IDMINT_REGIONS: 3, IDMINT_REGION: 0 })).toBe('/idmint/schemas/prod/fence');
    expect(fenceRoot({ IDMINT_REGIONS: 1 })).toBe('/idmint/fence');
  });
});
