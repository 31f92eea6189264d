import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { IdmintError } from '../../../src/core/errors.js';
import { BIZ_TAG_PATTERN, MAX_SEGMENT_ID } from '../../../src/core/ports.js';
import { mapDriverError, sqlState } from '../../../src/store/errors.js';
import { MIGRATIONS, splitStatements } from '../../../src/store/migrations.js';
import { BIZ_DEFAULTS, MAX_SHARDS, validateBizInput, validateBizPatch, validateBizTag, validateShard, validateStep } from '../../../src/store/validate.js';

describe('validateBizInput', () => {
  it('fills in the defaults', () => {
    expect(validateBizInput({ bizTag: 'order' })).toEqual({ bizTag: 'order', ...BIZ_DEFAULTS });
  });

  it('keeps every valid field', () => {
    const input = {
      bizTag: 'a.b_c-9',
      mode: 'sharded',
      step: 1,
      maxLimit: MAX_SEGMENT_ID,
      shards: MAX_SHARDS,
      fallback: 'error',
      pool: 'kafka',
      description: 'x',
    } as const;
    expect(validateBizInput(input)).toEqual({ ...input, startAfter: 0, format: 'decimal' });
  });

  it('defaults the fallback of a limited tag to segment: Snowflake IDs lie above any limit', () => {
    expect(validateBizInput({ bizTag: 'order', maxLimit: 4294967295 })).toMatchObject({ fallback: 'segment' });
    expect(validateBizInput({ bizTag: 'order' })).toMatchObject({ fallback: 'snowflake' });
  });

  it.each([
    [{ bizTag: 'order', shards: 2 }, 'shards'],
    [{ bizTag: 'order', mode: 'uid', shards: 4 }, 'shards'],
    [{ bizTag: 'order', maxLimit: 100, fallback: 'snowflake' }, 'fallback'],
    [{ bizTag: 'order', step: 0 }, 'step'],
    [{ bizTag: 'order', step: Number.POSITIVE_INFINITY }, 'step'],
    [{ bizTag: 'order', step: 10n }, 'step'],
    [{ bizTag: 'order', maxLimit: MAX_SEGMENT_ID + 1 }, 'maxLimit'],
    [{ bizTag: 'order', maxLimit: -1 }, 'maxLimit'],
    [{ bizTag: 'order', shards: 1.5 }, 'shards'],
    [{ bizTag: 'order', description: 'x'.repeat(1025) }, 'description'],
    [{ bizTag: 'order', mode: 'SEGMENT' }, 'mode'],
    [{ bizTag: 'order', extra: 1 }, 'extra'],
    [{ bizTag: 42 }, 'bizTag'],
    [{}, 'bizTag'],
  ])('refuses case %# (%s)', (input, field) => {
    expect(() => validateBizInput(input as never)).toThrow(expect.objectContaining({ code: 'BAD_REQUEST', field }));
  });

  it('refuses a non-object', () => {
    expect(() => validateBizInput(null as never)).toThrow(expect.objectContaining({ code: 'BAD_REQUEST', field: 'body' }));
    expect(() => validateBizPatch('x' as never)).toThrow(expect.objectContaining({ code: 'BAD_REQUEST', field: 'body' }));
  });
});

describe('validateBizPatch', () => {
  it('returns only the fields given, keeping an explicit maxLimit null', () => {
    expect(validateBizPatch({})).toEqual({});
    expect(validateBizPatch({ maxLimit: null, step: 5 })).toEqual({ maxLimit: null, step: 5 });
  });

  it('refuses bizTag: a tag is renamed by creating another', () => {
    expect(() => validateBizPatch({ bizTag: 'x' } as never)).toThrow(expect.objectContaining({ field: 'bizTag' }));
  });
});

describe('validateBizTag, validateStep, validateShard', () => {
  it('accepts exactly what BIZ_TAG_PATTERN accepts', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 70 }), (s) => {
        let ok = true;
        try {
          validateBizTag(s);
        } catch (err) {
          expect(err).toBeInstanceOf(IdmintError);
          ok = false;
        }
        expect(ok).toBe(BIZ_TAG_PATTERN.test(s));
      }),
    );
  });

  it('bounds step and shard', () => {
    expect(validateStep(1)).toBe(1);
    expect(() => validateStep(0)).toThrow(expect.objectContaining({ field: 'step' }));
    expect(validateShard(MAX_SHARDS - 1)).toBe(MAX_SHARDS - 1);
    expect(() => validateShard(MAX_SHARDS)).toThrow(expect.objectContaining({ field: 'shard' }));
  });
});

describe('splitStatements', () => {
  it('splits at line-ending semicolons, keeps leading comments, drops comment-only pieces', () => {
    expect(splitStatements("-- head\nCREATE TABLE a (x int);\n\n-- why\nCREATE TABLE b (y text DEFAULT 'a;b');\n-- tail\n")).toEqual([
      '-- head\nCREATE TABLE a (x int)',
      "-- why\nCREATE TABLE b (y text DEFAULT 'a;b')",
    ]);
  });

  it('finds one CREATE per table in the shipped migrations, numbered from 1 without gaps', () => {
    expect(MIGRATIONS.map((m) => m.version)).toEqual(MIGRATIONS.map((_, i) => i + 1));
    const statements = splitStatements(MIGRATIONS[0]!.sql);
    expect(statements).toHaveLength(4);
    for (const s of statements) expect(s).toMatch(/CREATE TABLE idmint_/);
  });
});

describe('mapDriverError', () => {
  it('passes SQL errors and idmint errors through, turns connection failures into NOT_READY', () => {
    const constraint = Object.assign(new Error('check'), { code: '23514' });
    expect(mapDriverError('postgres', constraint)).toBe(constraint);
    const own = new IdmintError('BAD_REQUEST', 'x');
    expect(mapDriverError('postgres', own)).toBe(own);
    for (const cause of [
      Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }),
      Object.assign(new Error('shutdown'), { code: '57P01' }),
      new Error('Connection terminated'),
    ]) {
      const mapped = mapDriverError('postgres', cause);
      expect(mapped).toMatchObject({ code: 'NOT_READY', retriable: true, cause });
    }
    expect(sqlState({ code: 'ECONNREFUSED' })).toBeUndefined();
    expect(sqlState(null)).toBeUndefined();
  });
});
