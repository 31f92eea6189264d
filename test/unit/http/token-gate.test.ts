import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { TagAccess, TagTokenInfo, TagTokenStore } from '../../../src/core/ports.js';
import { TokenGate } from '../../../src/http/tag-tokens.js';

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
    for (const name of new Set([...this.names, ...this.tokens.keys()]))
      all.set(name, { closed: this.tokens.has(name), hashes: (this.tokens.get(name) ?? []).map(sha) });
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

// The segment route's pipelined p99 was a query per request each second; then refresh-ahead
// answered entries of any age while a reload ran, and an idle process honoured revoked tokens
// (issue 39). Now: never a verdict from hashes older than the bound while Postgres answers (an
// older entry waits for its reload, shared), and past half the bound one reload runs behind
// the requests, so a tag in steady use never waits. Time is the gate's clock, stepped here.
describe('TokenGate', () => {
  const clocked = (): { now: number; clock: { now(): number } } => {
    const c = { now: 1_000_000, clock: { now: () => c.now } };
    return c;
  };

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

  it('past half the bound, one reload runs behind the requests, which keep the verdict meanwhile', async () => {
    const t = clocked();
    const store = new Hashes();
    store.tokens.set('order', ['good']);
    const gate = new TokenGate(store, { clock: t.clock });
    await gate.check('order', 'good');
    t.now += 600;
    for (let i = 0; i < 100; i++) expect(gate.checkCached('order', 'good')).toBeNull();
    expect(store.queries).toBe(2);
  });

  it('an idle tag: past the bound no verdict comes from the old hashes; the request waits for the reload, and a revocation made elsewhere refuses it', async () => {
    const t = clocked();
    const store = new Hashes();
    store.tokens.set('order', ['good']);
    const gate = new TokenGate(store, { clock: t.clock });
    await gate.check('order', 'good');
    store.tokens.set('order', ['next']); // rotated on another process: `good` revoked
    t.now += 1000;
    expect(gate.checkCached('order', 'good')).toBeUndefined();
    const burst = await Promise.allSettled(Array.from({ length: 200 }, () => gate.check('order', 'good')));
    expect(burst.filter((r) => r.status === 'fulfilled')).toHaveLength(0);
    expect(store.queries).toBe(2);
    await expect(gate.check('order', 'next')).resolves.toBeUndefined();
  });

  it('a token created elsewhere closes an open tag for requests without one after the bound', async () => {
    const t = clocked();
    const store = new Hashes();
    store.names.add('order');
    const gate = new TokenGate(store, { clock: t.clock });
    await gate.check('order', undefined);
    store.tokens.set('order', ['new']);
    t.now += 1000;
    await expect(gate.check('order', undefined)).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
  });

  it('while Postgres is down the last hashes apply, without a wait per request: a tag that had tokens keeps refusing callers without one', async () => {
    const t = clocked();
    const store = new Hashes();
    store.tokens.set('vault', ['good']);
    const gate = new TokenGate(store, { clock: t.clock });
    await gate.check('vault', 'good');
    store.failing = true;
    t.now += 5000;
    await expect(gate.check('vault', 'good')).resolves.toBeUndefined();
    const queries = store.queries;
    for (let i = 0; i < 100; i++) expect(gate.checkCached('vault', undefined)).toMatchObject({ code: 'UNAUTHORIZED' });
    expect(store.queries - queries).toBeLessThanOrEqual(1);
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
