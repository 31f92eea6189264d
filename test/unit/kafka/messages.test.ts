import { describe, expect, it } from 'vitest';
import { decodePoolBlock, decodeReply, decodeRequest, encodeErrorReply, encodeIdsReply, encodePoolBlock, encodeRequest } from '../../../src/kafka/messages.js';
import { poolGroup, poolTopic } from '../../../src/kafka/names.js';

const limits = { maxCount: 10_000, maxBytes: 4096 };
const valid = { v: 1, id: '3f2b8c1e-0000-4000-8000-000000000001', bizTag: 'order', count: 100, replyTo: 'idmint.replies.x', deadline: 1_700_000_000_000 };
const raw = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value));

describe('request codec', () => {
  it('round-trips a valid request', () => {
    const decoded = decodeRequest(encodeRequest({ id: valid.id, bizTag: 'order', count: 100, replyTo: valid.replyTo, deadline: valid.deadline }), limits);
    expect(decoded).toEqual({ ok: true, request: valid });
  });

  it.each([
    ['not JSON', raw('{"v":1,'), undefined],
    ['empty', Buffer.alloc(0), undefined],
    ['a JSON array', raw([1, 2]), undefined],
    ['wrong version', raw({ ...valid, v: 2 }), 'v'],
    ['missing bizTag', raw({ ...valid, bizTag: undefined }), 'bizTag'],
    ['bad bizTag', raw({ ...valid, bizTag: 'Order!' }), 'bizTag'],
    ['count as string', raw({ ...valid, count: '100' }), 'count'],
    ['count zero', raw({ ...valid, count: 0 }), 'count'],
    ['count fractional', raw({ ...valid, count: 1.5 }), 'count'],
    ['count above max', raw({ ...valid, count: 10_001 }), 'count'],
    ['deadline as string', raw({ ...valid, deadline: 'soon' }), 'deadline'],
    ['missing id', raw({ ...valid, id: undefined }), 'id'],
  ])('rejects %s as BAD_REQUEST naming the field', (_name, value, field) => {
    const decoded = decodeRequest(value, limits);
    expect(decoded.ok).toBe(false);
    if (decoded.ok) return;
    expect(decoded.error.code).toBe('BAD_REQUEST');
    expect(decoded.error.field).toBe(field ?? 'value');
  });

  it('keeps replyTo and id readable on a bad request so it can be answered', () => {
    const decoded = decodeRequest(raw({ ...valid, count: -1 }), limits);
    expect(decoded).toMatchObject({ ok: false, replyTo: valid.replyTo, id: valid.id });
  });

  it('cannot answer when replyTo is missing or not a topic name', () => {
    for (const replyTo of [undefined, 42, 'bad topic name', '']) {
      const decoded = decodeRequest(raw({ ...valid, replyTo, count: -1 }), limits);
      expect(decoded.ok).toBe(false);
      if (!decoded.ok) expect(decoded.replyTo).toBeUndefined();
    }
  });

  it('rejects an oversized message but still reads its replyTo', () => {
    const decoded = decodeRequest(raw({ ...valid, padding: 'x'.repeat(5000) }), limits);
    expect(decoded).toMatchObject({ ok: false, replyTo: valid.replyTo });
    if (!decoded.ok) expect(decoded.error.message).toMatch(/exceeds the 4096-byte limit/);
  });
});

describe('reply codec', () => {
  it('round-trips IDs as decimal strings beyond 2^53', () => {
    const ids = ['1', '9007199254740993', '9223372036854775807'];
    expect(decodeReply(encodeIdsReply('r1', ids, 'snowflake'))).toEqual({ v: 1, id: 'r1', ids, source: 'snowflake' });
  });

  it('round-trips an error reply', () => {
    expect(decodeReply(encodeErrorReply('r2', 'UNKNOWN_BIZ_TAG', 'nope'))).toEqual({ v: 1, id: 'r2', error: { code: 'UNKNOWN_BIZ_TAG', message: 'nope' } });
  });

  it('refuses replies that are not ours', () => {
    expect(decodeReply(raw('garbage'))).toBeNull();
    expect(decodeReply(raw({ v: 1, id: 'x', ids: [1, 2], source: 'pool' }))).toBeNull();
    expect(decodeReply(raw({ v: 1, id: 'x', error: { code: 'NO_SUCH_CODE', message: '' } }))).toBeNull();
    expect(decodeReply(null)).toBeNull();
  });
});

describe('pool block codec and names', () => {
  it('round-trips a block', () => {
    expect(decodePoolBlock(encodePoolBlock('order', 1001, 2000))).toEqual({ v: 1, bizTag: 'order', start: '1001', end: '2000' });
  });

  it('refuses an inverted or malformed block', () => {
    expect(decodePoolBlock(encodePoolBlock('order', 5, 4))).toBeNull();
    expect(decodePoolBlock(raw({ v: 1, bizTag: 'order', start: 1, end: 2 }))).toBeNull();
  });

  it('names pool topics and groups per tag and shard without collisions', () => {
    expect(poolTopic('order')).toBe('idmint.ids.order');
    expect(poolGroup('order')).toBe('idmint.pool.order');
    expect(poolTopic('order', 3)).toBe('idmint.ids.order.S3');
    expect(poolTopic('order', 3)).not.toBe(poolTopic('order.s3'));
    expect(() => poolTopic('Bad Tag')).toThrow(/invalid biz tag/);
  });
});

describe('decodeRequest hardening (Kafka points of the adversarial probe)', () => {
  const limits = { maxCount: 1000, maxBytes: 4096, requestTopic: 'idmint.requests' };
  const request = (replyTo: string) => Buffer.from(JSON.stringify({ v: 1, id: 'r1', bizTag: 'order', count: 1, replyTo, deadline: Date.now() + 5000 }));

  it('checks the size before parsing: a huge message is refused without JSON.parse, reply address sniffed from its head', () => {
    const huge = Buffer.concat([Buffer.from('{"v":1,"id":"big","replyTo":"idmint.replies.my","pad":"'), Buffer.alloc(1_000_000, 'x'), Buffer.from('"')]);
    const parse = JSON.parse;
    let parsed = 0;
    JSON.parse = ((...args: Parameters<typeof JSON.parse>) => (parsed++, parse(...args))) as typeof JSON.parse;
    try {
      const decoded = decodeRequest(huge, limits);
      expect(decoded).toMatchObject({ ok: false, replyTo: 'idmint.replies.my', id: 'big' });
      expect(parsed).toBe(0);
    } finally {
      JSON.parse = parse;
    }
  });

  // Issue 40: a responder wrote replies into any topic outside idmint.* a request named.
  it.each(['idmint.requests', 'idmint.ids.order', 'idmint.anything', 'my-service.replies', 'orders', 'idmint.replies.', 'idmint.eu.replies.x'])(
    'refuses replyTo %s, not a reply topic of the deployment, and does not reply there',
    (topic) => {
      const decoded = decodeRequest(request(topic), limits);
      expect(decoded.ok).toBe(false);
      expect(decoded).not.toHaveProperty('replyTo');
      if (!decoded.ok) expect(decoded.error.message).toMatch(/reply topic of this deployment/);
    },
  );

  it("accepts the clients' reply topics, of the namespace when there is one", () => {
    expect(decodeRequest(request('idmint.replies.abc.123'), limits).ok).toBe(true);
    expect(decodeRequest(request('idmint.eu.replies.abc.123'), { ...limits, replyPrefix: 'idmint.eu.replies.' }).ok).toBe(true);
    expect(decodeRequest(request('idmint.replies.abc.123'), { ...limits, replyPrefix: 'idmint.eu.replies.' }).ok).toBe(false);
  });

  it('a request that is not JSON but names a readable reply topic gets an error reply there', () => {
    const decoded = decodeRequest(Buffer.from('{"v":1,"id":"r1","replyTo":"idmint.replies.c.1", oops'), limits);
    expect(decoded).toMatchObject({ ok: false, replyTo: 'idmint.replies.c.1', id: 'r1' });
    const elsewhere = decodeRequest(Buffer.from('{"replyTo":"my-service.replies", oops'), limits);
    expect(elsewhere).not.toHaveProperty('replyTo');
  });
});
