import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { signPoolBlock, verifyPoolBlock } from '../../../src/kafka/block-signature.js';
import { decodePoolBlock, encodePoolBlock } from '../../../src/kafka/messages.js';

const KEY = 'pool-block-key-0123456789';
const tag = fc.stringMatching(/^[a-z][a-z0-9_-]{0,20}$/);
const block = fc
  .record({ bizTag: tag, shard: fc.integer({ min: 0, max: 1023 }), start: fc.integer({ min: 1, max: 2 ** 52 }), len: fc.integer({ min: 0, max: 1_000_000 }) })
  .map(({ bizTag, shard, start, len }) => ({ bizTag, shard, start, end: start + len }));

describe('pool block signatures', () => {
  it('a block signed with the key decodes and verifies', () => {
    fc.assert(
      fc.property(block, (b) => {
        const sig = signPoolBlock(KEY, b.bizTag, b.shard, b.start, b.end);
        const decoded = decodePoolBlock(encodePoolBlock(b.bizTag, b.start, b.end, { shard: b.shard, sig }));
        expect(decoded).not.toBeNull();
        expect(verifyPoolBlock(KEY, decoded!)).toBe(true);
      }),
    );
  });

  it('changing the tag, shard, start, end or key fails verification', () => {
    fc.assert(
      fc.property(block, fc.integer({ min: 0, max: 4 }), (b, field) => {
        const sig = signPoolBlock(KEY, b.bizTag, b.shard, b.start, b.end);
        const moved = {
          bizTag: field === 0 ? `${b.bizTag}x` : b.bizTag,
          shard: field === 1 ? b.shard + 1 : b.shard,
          start: String(field === 2 ? b.start + 1 : b.start),
          end: String(field === 3 ? b.end + 1 : b.end),
          sig,
        };
        expect(verifyPoolBlock(field === 4 ? `${KEY}-other` : KEY, moved)).toBe(false);
      }),
    );
  });

  it('an unsigned block never verifies, and shard 0 is written as no shard', () => {
    const decoded = decodePoolBlock(encodePoolBlock('order', 1, 5, { shard: 0 }));
    expect(decoded).toEqual({ v: 1, bizTag: 'order', start: '1', end: '5' });
    expect(verifyPoolBlock(KEY, decoded!)).toBe(false);
    expect(decodePoolBlock(Buffer.from(JSON.stringify({ v: 1, bizTag: 'order', start: '1', end: '5', sig: 'zz' })))).toBeNull();
  });
});
