import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  blockBytes,
  generateSigningKey,
  parseSigningKey,
  parseVerifyKeys,
  replyBytes,
  type BlockPlace,
  type ReplyContent,
} from '../../../src/kafka/signing.js';

const key = generateSigningKey();
const keys = parseVerifyKeys(key.publicKey);

const place = fc.record({
  namespace: fc.constantFrom('', 'eu', 'us-west'),
  topic: fc.constantFrom('idmint.ids.order', 'idmint.ids.user', 'idmint.eu.ids.order'),
  partition: fc.integer({ min: 0, max: 15 }),
  seq: fc.bigInt({ min: 1n, max: 2n ** 53n - 1n }).map(String),
  at: fc.constantFrom('1795800000000', '1795800000001'),
  bizTag: fc.constantFrom('order', 'user'),
  shard: fc.integer({ min: 0, max: 3 }),
  start: fc.bigInt({ min: 1n, max: 2n ** 53n - 1n }).map(String),
  end: fc.bigInt({ min: 1n, max: 2n ** 53n - 1n }).map(String),
}) satisfies fc.Arbitrary<BlockPlace>;

describe('Ed25519 signatures on blocks and replies (issue 40)', () => {
  it('a key survives its text form; its public half verifies what it signed, and names itself by kid', () => {
    const again = parseSigningKey(key.secretKey);
    expect(again.kid).toBe(key.kid);
    expect(again.publicKey).toBe(key.publicKey);
    expect(key.publicKey).toMatch(/^ed25519:[0-9a-f]{16}:[A-Za-z0-9_-]{43}$/);
    const bytes = Buffer.from('hello');
    expect(keys.verify(key.kid, bytes, again.sign(bytes))).toBe(true);
    expect(keys.verify('0000000000000000', bytes, key.sign(bytes))).toBe(false);
  });

  it('property: a block verifies only where it was signed for — any other namespace, topic, partition, sequence, tag, shard or range fails', () => {
    fc.assert(
      fc.property(place, place, (signedFor, presented) => {
        const sig = key.sign(blockBytes(signedFor));
        const same = JSON.stringify(signedFor) === JSON.stringify(presented);
        expect(keys.verify(key.kid, blockBytes(presented), sig)).toBe(same);
      }),
      { numRuns: 300 },
    );
  });

  it('property: a reply verifies only for its reply topic, request id and content', () => {
    const content = fc.oneof(
      fc.record({
        kind: fc.constant('ids' as const),
        source: fc.constantFrom('pool', 'segment'),
        format: fc.constantFrom('', 'base62'),
        ids: fc.array(fc.bigInt({ min: 1n, max: 99n }).map(String), { minLength: 1, maxLength: 4 }),
      }),
      fc.record({ kind: fc.constant('error' as const), code: fc.constantFrom('NOT_READY', 'BAD_REQUEST'), message: fc.constantFrom('a', 'b') }),
    ) as fc.Arbitrary<ReplyContent>;
    const reply = fc.record({ replyTo: fc.constantFrom('idmint.replies.a.1', 'idmint.replies.b.2'), id: fc.constantFrom('r1', 'r2'), content });
    fc.assert(
      fc.property(reply, reply, (signedFor, presented) => {
        const sig = key.sign(replyBytes(signedFor.replyTo, signedFor.id, signedFor.content));
        const same = JSON.stringify(signedFor) === JSON.stringify(presented);
        expect(keys.verify(key.kid, replyBytes(presented.replyTo, presented.id, presented.content), sig)).toBe(same);
      }),
      { numRuns: 300 },
    );
  });

  it('two keys at once (a rotation); malformed keys are refused naming the option', () => {
    const next = generateSigningKey();
    const both = parseVerifyKeys(`${key.publicKey}\n${next.publicKey}`);
    expect(both.kids).toEqual([key.kid, next.kid]);
    const bytes = Buffer.from('x');
    expect(both.verify(next.kid, bytes, next.sign(bytes))).toBe(true);
    expect(() => parseVerifyKeys('')).toThrow(/names no key/);
    expect(() => parseVerifyKeys(`ed25519:${'0'.repeat(16)}:${key.publicKey.split(':')[2]}`)).toThrow(/does not match its key id/);
    expect(() => parseVerifyKeys('hmac:abc', 'IDMINT_VERIFY_KEY')).toThrow(/IDMINT_VERIFY_KEY/);
    expect(() => parseSigningKey('ed25519-secret:short')).toThrow(/IDMINT_SIGNING_KEY/);
  });
});
