import fc from 'fast-check';
import Sqids from 'sqids';
import { describe, expect, it } from 'vitest';
import { FEISTEL_ROUNDS, FeistelPermutation } from '../../../src/core/format/feistel.js';
import { createCodec, fromBase62, ID_FORMATS, toBase62 } from '../../../src/core/format/format.js';

const keys = Array.from({ length: FEISTEL_ROUNDS }, (_, i) => (i * 0x27d4eb2f) >>> 0);
const sqids = new Sqids();

describe('ID formats', () => {
  it('base62 round-trips every 63-bit value', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: (1n << 63n) - 1n }), (v) => {
        expect(fromBase62(toBase62(v))).toBe(v);
      }),
    );
  });

  it.each([
    ['segment', 1n, (1n << 53n) - 1n],
    ['snowflake', 0n, 1n << 63n],
    ['limited', 1n, 4_294_967_295n],
  ] as const)('every format round-trips %s IDs and refuses what it never produced', (_, first, domain) => {
    for (const format of ID_FORMATS) {
      const codec = createCodec(format, { first, domain, permutation: new FeistelPermutation(domain, keys), sqids });
      fc.assert(
        fc.property(fc.bigInt({ min: first, max: first + domain - 1n }), (raw) => {
          const formatted = codec.encode(raw.toString());
          expect(codec.decode(formatted)).toBe(raw.toString());
          if (format === 'obfuscated') expect(BigInt(formatted) >= first && BigInt(formatted) < first + domain).toBe(true);
        }),
        { numRuns: 300 },
      );
      expect(() => codec.decode('not an id!')).toThrow(new RegExp(`not an ID of format ${format.replace('+', '\\+')}`));
    }
  });

  it('decoding any string either gives an ID or throws BAD_REQUEST naming the format (issue 42: long sqids input threw from Sqids)', () => {
    const codecs = ID_FORMATS.map((format) =>
      createCodec(format, { first: 1n, domain: (1n << 53n) - 1n, permutation: new FeistelPermutation((1n << 53n) - 1n, keys), sqids }),
    );
    const inputs = fc.oneof(fc.string({ maxLength: 256 }), fc.stringMatching(/^[0-9A-Za-z]{12,256}$/));
    const refusedOrDecoded = (decode: () => string): void => {
      try {
        expect(decode()).toMatch(/^\d+$/);
      } catch (err) {
        expect(err).toMatchObject({ code: 'BAD_REQUEST', message: expect.stringMatching(/is not an ID of format/) });
      }
    };
    for (const input of ['zzzzzzzzzzzzzzzzzzzzzz', 'A'.repeat(64), '9999999999999999999999999'])
      for (const codec of codecs) refusedOrDecoded(() => codec.decode(input));
    fc.assert(
      fc.property(inputs, (input) => codecs.forEach((codec) => refusedOrDecoded(() => codec.decode(input)))),
      { numRuns: 300 },
    );
  });

  it('obfuscated IDs of consecutive raw IDs do not look consecutive', () => {
    const codec = createCodec('obfuscated', { first: 1n, domain: (1n << 53n) - 1n, permutation: new FeistelPermutation((1n << 53n) - 1n, keys) });
    const out = Array.from({ length: 100 }, (_, i) => BigInt(codec.encode(String(i + 1))));
    const steps = out.slice(1).filter((v, i) => v === out[i]! + 1n).length;
    expect(steps).toBe(0);
  });
});
