import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isReplyTopicAllowed } from '../../../src/kafka/messages.js';
import { kafkaNames, POOL_GROUP_PREFIX, POOL_TOPIC_PREFIX, poolGroup, poolTopic, REQUEST_TOPIC, RESPONDER_GROUP } from '../../../src/kafka/names.js';

const namespace = fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,47}$/).filter((n) => !['ids', 'pool', 'replies', 'requests', 'responders'].includes(n));
const tag = fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,63}$/);
const shard = fc.integer({ min: 0, max: 63 });

describe('Kafka names in a namespace (IDMINT_KAFKA_NAMESPACE)', () => {
  it('without a namespace: the names idmint always used', () => {
    const names = kafkaNames();
    expect(names.requestTopic).toBe('idmint.requests');
    expect(names.responderGroup).toBe('idmint.responders');
    expect(names.poolTopic('order')).toBe(poolTopic('order'));
    expect(names.poolGroup('order', 2)).toBe(poolGroup('order', 2));
    expect(names.poolTopic('order', 2)).toBe('idmint.ids.order.S2');
    expect([REQUEST_TOPIC, RESPONDER_GROUP, POOL_TOPIC_PREFIX, POOL_GROUP_PREFIX]).toEqual([
      'idmint.requests',
      'idmint.responders',
      'idmint.ids.',
      'idmint.pool.',
    ]);
  });

  it('in a namespace: every name carries it', () => {
    const names = kafkaNames('eu');
    expect([names.requestTopic, names.responderGroup, names.poolTopic('order'), names.poolGroup('order'), names.poolTopic('order', 3)]).toEqual([
      'idmint.eu.requests',
      'idmint.eu.responders',
      'idmint.eu.ids.order',
      'idmint.eu.pool.order',
      'idmint.eu.ids.order.S3',
    ]);
    expect([names.poolTopicPrefix, names.poolGroupPrefix]).toEqual(['idmint.eu.ids.', 'idmint.eu.pool.']);
  });

  it('refuses a namespace that is not one, or that idmint names use', () => {
    for (const bad of ['', 'EU', 'a.b', '-eu', 'x'.repeat(49), 'eu ']) expect(() => kafkaNames(bad), bad).toThrow(/lower-case letters, digits and -/);
    for (const reserved of ['ids', 'pool', 'replies', 'requests', 'responders']) expect(() => kafkaNames(reserved)).toThrow(/a name idmint's own topics use/);
  });

  it('two deployments never share a topic or group: different namespaces (or none) give different names for any tags and shards', () => {
    fc.assert(
      fc.property(fc.option(namespace, { nil: undefined }), fc.option(namespace, { nil: undefined }), tag, tag, shard, shard, (n1, n2, t1, t2, s1, s2) => {
        fc.pre(n1 !== n2);
        const [a, b] = [kafkaNames(n1), kafkaNames(n2)];
        const ofA = [a.requestTopic, a.poolTopic(t1, s1)];
        const ofB = [b.requestTopic, b.poolTopic(t2, s2)];
        for (const topic of ofA) expect(ofB).not.toContain(topic);
        expect([b.responderGroup, b.poolGroup(t2, s2)]).not.toContain(a.poolGroup(t1, s1));
        expect(a.responderGroup).not.toBe(b.responderGroup);
      }),
      { numRuns: 2000 },
    );
  });

  it('a pool topic is never a topic a client may ask replies on', () => {
    fc.assert(
      fc.property(fc.option(namespace, { nil: undefined }), tag, shard, (n, t, s) => {
        const names = kafkaNames(n);
        expect(isReplyTopicAllowed(names.poolTopic(t, s), names.requestTopic)).toBe(false);
        expect(isReplyTopicAllowed(names.requestTopic, names.requestTopic)).toBe(false);
      }),
      { numRuns: 2000 },
    );
  });
});
