import { describe, expect, it } from 'vitest';
import type { BizTag } from '../../../src/core/ports.js';
import { TagCache } from '../../../src/dispenser/tag-cache.js';
import { ManualClock } from '../core/helpers.js';

function tag(bizTag: string, step: number): BizTag {
  const at = new Date(0);
  return {
    bizTag,
    mode: 'segment',
    step,
    maxLimit: null,
    shards: 1,
    fallback: 'snowflake',
    pool: 'redis-list',
    format: 'decimal',
    description: '',
    createdAt: at,
    updatedAt: at,
  };
}

describe('TagCache options', () => {
  it('keeps the defaults for options given as undefined (settings older than 1000 ms are reloaded)', async () => {
    const clock = new ManualClock(1_000_000);
    let step = 100;
    let loads = 0;
    const cache = new TagCache({ store: { getBiz: async (name) => (loads++, tag(name, step)) }, clock, ttlMs: undefined, maxMisses: undefined });
    expect(await cache.get('order')).toMatchObject({ step: 100 });
    step = 200;
    clock.advance(999);
    expect(await cache.get('order')).toMatchObject({ step: 100 });
    clock.advance(1);
    expect(await cache.get('order')).toMatchObject({ step: 200 });
    expect(loads).toBe(2);
  });

  it.each([
    ['ttlMs', { ttlMs: -1 }],
    ['ttlMs', { ttlMs: 1.5 }],
    ['maxMisses', { maxMisses: -1 }],
  ])('refuses a bad %s as CONFIG_INVALID naming it', (field, bad) => {
    expect(() => new TagCache({ store: { getBiz: async () => null }, ...bad })).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID', field, message: expect.stringContaining(`TagCache: option ${field} must be an integer ≥ 0`) }),
    );
  });
});
