import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { TagTokenInfo, TagTokenStore } from '../../../src/core/ports.js';
import { TokenGate } from '../../../src/http/tag-tokens.js';
import { until } from '../../support/poll.js';

const sha = (t: string): string => createHash('sha256').update(t).digest('hex');

/** Token hashes in memory, counting the queries a real store would run. */
class Hashes implements TagTokenStore {
  queries = 0;
  readonly tokens = new Map<string, string[]>();
  async hashes(bizTag: string): Promise<string[]> {
    this.queries++;
    await new Promise((r) => setTimeout(r, 5)); // a Postgres round trip
    return (this.tokens.get(bizTag) ?? []).map(sha);
  }
  async create(): Promise<TagTokenInfo & { token: string }> {
    throw new Error('not used');
  }
  async list(): Promise<TagTokenInfo[]> {
    return [];
  }
  async revoke(): Promise<void> {}
}

// The segment route's pipelined p99 was this: every request arriving while a tag's hashes were
// older than a second ran its own query. Now one reload runs behind the requests, which keep the
// last verdict meanwhile; a revoked token stops working once that reload lands.
describe('TokenGate', () => {
  it('loads a tag once for concurrent first requests, then answers from the cache without a promise', async () => {
    const store = new Hashes();
    store.tokens.set('order', ['good']);
    const gate = new TokenGate(store);
    expect(gate.checkCached('order', 'good')).toBeUndefined();
    await Promise.all(Array.from({ length: 100 }, () => gate.check('order', 'good')));
    expect(store.queries).toBe(1);
    expect(gate.checkCached('order', 'good')).toBeNull();
    expect(gate.checkCached('order', 'bad')).toMatchObject({ code: 'UNAUTHORIZED' });
  });

  it('an expired entry answers at once while one reload runs behind; a revocation lands with that reload', async () => {
    const store = new Hashes();
    store.tokens.set('order', ['good']);
    const gate = new TokenGate(store);
    await gate.check('order', 'good');
    store.tokens.set('order', ['next']); // rotated elsewhere: `good` revoked
    await new Promise((r) => setTimeout(r, 1010)); // past the second the hashes are trusted
    for (let i = 0; i < 100; i++) expect(gate.checkCached('order', 'good')).toBeNull();
    expect(store.queries).toBe(2);
    await until('the reload to land', () => gate.checkCached('order', 'good') !== null, { timeoutMs: 5000, intervalMs: 5 });
    expect(gate.checkCached('order', 'good')).toMatchObject({ code: 'UNAUTHORIZED' });
    expect(gate.checkCached('order', 'next')).toBeNull();
    expect(store.queries).toBe(2);
  });
});
