import { describe, expect, it } from 'vitest';
import type { RegionsReport } from '../../../src/regions/report.js';
import { checkKeyAcrossRegions, checkRegionPair, planSync, type TagDef } from '../../../src/regions/sync.js';

const tag = (bizTag: string, over: Partial<TagDef> = {}): TagDef => ({
  bizTag,
  mode: 'segment',
  step: 1000,
  maxLimit: null,
  shards: 1,
  fallback: 'snowflake',
  pool: 'auto',
  format: 'decimal',
  description: '',
  ...over,
});
const region = (r: number, over: Partial<RegionsReport> = {}): RegionsReport => ({ regions: 2, region: r, stripe: 1_000_000, floors: {}, ...over });
const urls = { from: 'http://a', here: 'http://b' };

describe('biz sync', () => {
  it('wants two regions of one split with different numbers: the same IDMINT_REGION twice is named', () => {
    expect(() => checkRegionPair(region(0), region(1), urls)).not.toThrow();
    expect(() => checkRegionPair(region(1), region(1), urls)).toThrow(
      /http:\/\/a and http:\/\/b are both region 1: two deployments given the same IDMINT_REGION hand out the same IDs/,
    );
    expect(() => checkRegionPair({ regions: 1, floors: {} }, region(1), urls)).toThrow(/--from \(http:\/\/a\) is a single region/);
    expect(() => checkRegionPair(region(0), region(1, { stripe: 10 }), urls)).toThrow(/regions of different splits/);
  });

  it('creates the missing tags (above region 0 floors), follows the changeable fields, refuses what is fixed, leaves tags only here alone', () => {
    const source = [
      tag('new'),
      tag('floored', { step: 500 }),
      tag('same'),
      tag('changed', { step: 2000, fallback: 'segment', description: 'x' }),
      tag('other-mode', { mode: 'snowflake' }),
      tag('obf', { format: 'obfuscated', maxLimit: 1000 }),
      tag('flakes', { mode: 'snowflake' }),
    ];
    const here = [tag('same'), tag('changed'), tag('other-mode'), tag('obf', { format: 'obfuscated', maxLimit: 2000 }), tag('mine-only')];
    const steps = planSync(
      source,
      here,
      region(0, { floors: { floored: '4200', flakes: '99' }, obfuscationKeyFingerprint: 'aa' }),
      region(1, { obfuscationKeyFingerprint: 'aa' }),
    );
    expect(steps).toEqual([
      {
        bizTag: 'new',
        action: 'create',
        body: {
          bizTag: 'new',
          mode: 'segment',
          step: 1000,
          maxLimit: null,
          shards: 1,
          fallback: 'snowflake',
          pool: 'auto',
          format: 'decimal',
          description: '',
        },
      },
      { bizTag: 'floored', action: 'create', body: expect.objectContaining({ bizTag: 'floored', step: 500, startAfter: 4200 }) },
      { bizTag: 'same', action: 'unchanged' },
      {
        bizTag: 'changed',
        action: 'update',
        patch: { step: 2000, fallback: 'segment', description: 'x' },
        changes: ['step 1000 -> 2000', 'fallback "snowflake" -> "segment"', 'description "" -> "x"'],
      },
      { bizTag: 'other-mode', action: 'conflict', reason: 'its mode is segment here, snowflake there (fixed at creation)' },
      { bizTag: 'obf', action: 'conflict', reason: "its maxLimit is 2000 here, 1000 there, and an obfuscated tag's limit is fixed" },
      // A Snowflake tag has no counter: no floor, whatever the report says.
      { bizTag: 'flakes', action: 'create', body: expect.not.objectContaining({ startAfter: expect.anything() }) },
    ]);
  });

  it('an existing tag with a floor is raised to it (a no-op when it is above already); different obfuscation keys refuse obfuscated tags', () => {
    expect(planSync([tag('t')], [tag('t')], region(0, { floors: { t: '10' } }), region(1))).toEqual([
      { bizTag: 't', action: 'update', patch: { startAfter: 10 }, changes: [] },
    ]);
    const keys = planSync(
      [tag('o', { format: 'obfuscated+base62' }), tag('d')],
      [],
      region(0, { obfuscationKeyFingerprint: 'aa' }),
      region(1, { obfuscationKeyFingerprint: 'bb' }),
    );
    expect(keys.map((s) => s.action)).toEqual(['conflict', 'create']);
    // A region that recorded no key cannot show it has the same one (issue 39): refused too.
    const unrecorded = planSync([tag('o', { format: 'obfuscated' })], [], region(0, { obfuscationKeyFingerprint: 'aa' }), region(1));
    expect(unrecorded.map((s) => s.action)).toEqual(['conflict']);
  });

  it('biz create --regions: an obfuscated tag only where every region recorded the same key', () => {
    const at = (url: string, fingerprint?: string) => ({ url, report: region(0, fingerprint ? { obfuscationKeyFingerprint: fingerprint } : {}) });
    expect(() => checkKeyAcrossRegions('obfuscated', [at('a', 'aa'), at('b', 'aa')])).not.toThrow();
    expect(() => checkKeyAcrossRegions('decimal', [at('a', 'aa'), at('b')])).not.toThrow();
    expect(() => checkKeyAcrossRegions('obfuscated+sqids', [at('a', 'aa'), at('b', 'bb')])).toThrow(/different IDMINT_OBFUSCATION_KEYs/);
    expect(() => checkKeyAcrossRegions('obfuscated', [at('a', 'aa'), at('b')])).toThrow(/b recorded no IDMINT_OBFUSCATION_KEY/);
  });
});
