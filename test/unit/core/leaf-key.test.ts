import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LEAF_KEY_PATTERN, leafKeyToBizTag } from '../../../src/core/leaf-key.js';
import { BIZ_TAG_PATTERN } from '../../../src/core/ports.js';

const leafKey = fc.stringMatching(LEAF_KEY_PATTERN);

describe('leafKeyToBizTag', () => {
  it('keeps a key that is already a valid tag', () => {
    expect(leafKeyToBizTag('order')).toBe('order');
    fc.assert(fc.property(fc.stringMatching(BIZ_TAG_PATTERN), (tag) => leafKeyToBizTag(tag) === tag));
  });

  it('maps every Leaf key to a valid tag', () => {
    expect(leafKeyToBizTag('Bad_Key')).toMatch(/^bad_key-[0-9a-f]{8}$/);
    expect(leafKeyToBizTag('x'.repeat(128))).toHaveLength(64);
    fc.assert(fc.property(leafKey, (key) => BIZ_TAG_PATTERN.test(leafKeyToBizTag(key))));
  });

  it('keeps keys that differ only in case apart, as Leaf does', () => {
    expect(leafKeyToBizTag('Order')).not.toBe(leafKeyToBizTag('order'));
    expect(leafKeyToBizTag('Order')).not.toBe(leafKeyToBizTag('ORDER'));
    // Distinct keys give distinct tags (a 32-bit hash: collisions are possible in principle, and
    // `idmint import leaf` refuses them; a fixed seed keeps this test deterministic).
    fc.assert(
      fc.property(fc.uniqueArray(leafKey, { maxLength: 200 }), (keys) => new Set(keys.map(leafKeyToBizTag)).size === keys.length),
      { seed: 42 },
    );
  });

  it('is deterministic', () => {
    fc.assert(fc.property(leafKey, (key) => leafKeyToBizTag(key) === leafKeyToBizTag(key)));
  });
});
