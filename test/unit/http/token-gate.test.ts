import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { TagAccess, TagTokenInfo, TagTokenStore } from '../../../src/core/ports.js';
import { TokenGate } from '../../../src/http/tag-tokens.js';
import { until } from '../../support/poll.js';

const sha = (t: string): string => createHash('sha256').update(t).digest('hex');

/** Token hashes in memory, counting the queries a real store would run. */
class Hashes implements TagTokenStore {
  queries = 0;
  /** Live tokens per tag; a tag listed here with none left is closed (every token revoked). */
  readonly tokens = new Map<string, string[]>();
  async access(bizTag: string): Promise<TagAccess> {
    this.queries++;
    await new Promise((r) => setTimeout(r, 5)); // a Postgres round trip
    if (this.failing) throw new Error('connect ECONNREFUSED');
    const live = this.tokens.get(bizTag);
    return { closed: live !== undefined, hashes: (live ?? []).map(sha) };
  }
  /** Tags known to the store (open ones included), for accessAll. */
  readonly names = new Set<string>();
  failing = false;
  async accessAll(): Promise<Map<string, TagAccess>> {
    if (this.failing) throw new Error('connect ECONNREFUSED');
    const all = new Map<string, TagAccess>();
    for (const name of new Set([...this.names, ...this.tokens.keys()])) all.set(name, { closed: this.tokens.has(name), hashes: (this.tokens.get(name) ?? []).map(sha) });
    return all;
  }
  async open(bizTag: string): Promise<number> {
    this.tokens.delete(bizTag);
    return 0;
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

  it('a tag whose last token was revoked stays closed to everyone until it is opened', async () => {
    const store = new Hashes();
    store.tokens.set('order', []);
    const gate = new TokenGate(store);
    await expect(gate.check('order', undefined)).rejects.toMatchObject({ code: 'UNAUTHORIZED', message: expect.stringContaining('requires a tag token') });
    await expect(gate.check('order', 'leaked')).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    await store.open('order');
    gate.invalidate('order');
    await expect(gate.check('order', undefined)).resolves.toBeUndefined();
  });

  it('listed ahead of a Postgres outage, a tag never checked here is still checked, not refused', async () => {
    const store = new Hashes();
    store.names.add('plain');
    store.tokens.set('vault', ['good']);
    const gate = new TokenGate(store);
    await gate.preloadAll();
    store.failing = true;
    await expect(gate.check('plain', undefined)).resolves.toBeUndefined();
    await expect(gate.check('vault', 'good')).resolves.toBeUndefined();
    await expect(gate.check('vault', undefined)).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    // Never listed: refused (closed by default), as before.
    await expect(gate.check('other', undefined)).rejects.toThrow('ECONNREFUSED');
  });

  it('a listing that started before a change made here (a revoke) is not cached', async () => {
    const store = new Hashes();
    store.tokens.set('vault', ['leaked']);
    const gate = new TokenGate(store);
    const listing = gate.preloadAll();
    store.tokens.set('vault', []); // revoked here while the listing runs
    gate.invalidate('vault');
    await listing;
    expect(gate.checkCached('vault', 'leaked')).toBeUndefined();
    await expect(gate.check('vault', 'leaked')).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
  });
});
