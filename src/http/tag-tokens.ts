import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { IdmintError } from '../core/errors.js';
import { BIZ_TAG_PATTERN, type TagTokenInfo, type TagTokenStore } from '../core/ports.js';

/** A tag's access as checked: open, or closed to all but these hashes. */
interface Access {
  readonly closed: boolean;
  readonly hashes: ReadonlySet<string>;
}
import { parseBizTag } from './params.js';

const CACHE_MS = 1000;
const MAX_CACHED = 10_000;

/** Where a caller puts a tag token: `?token=` (Tinyid's) or the `X-Idmint-Token` header. */
export function presentedToken(request: FastifyRequest): string | undefined {
  const header = request.headers['x-idmint-token'];
  if (typeof header === 'string' && header !== '') return header;
  const query = (request.query as { token?: unknown }).token;
  return typeof query === 'string' && query !== '' ? query : undefined;
}

/**
 * Checks tag tokens on the routes that hand out IDs. A tag's token hashes are trusted for a
 * second; older ones still answer while one reload runs in the background (refresh-ahead), so a
 * token created or revoked on any process takes effect everywhere within a second and a round
 * trip, and no request waits on Postgres for a tag whose hashes were loaded before (a reload
 * per request, all at once each second, was the segment route's whole p99 under load). While
 * Postgres is down the last hashes stay in force.
 */
export class TokenGate {
  private readonly cache = new Map<string, { at: number; access: Access }>();
  private readonly loading = new Map<string, Promise<Access>>();
  /** Changes made in this process, so a listing that started before one is not cached. */
  private changes = 0;

  constructor(private readonly store: TagTokenStore) {}

  async check(bizTag: string, presented: string | undefined): Promise<void> {
    if (!BIZ_TAG_PATTERN.test(bizTag)) return;
    const refusal = this.verdict(bizTag, await this.load(bizTag), presented);
    if (refusal) throw refusal;
  }

  /**
   * The hot path: the verdict from the cached hashes, without a promise — `null` to let the
   * request through, an error to refuse it, `undefined` when the hashes were never loaded.
   */
  checkCached(bizTag: string, presented: string | undefined): IdmintError | null | undefined {
    const cached = this.cache.get(bizTag);
    if (!cached) return BIZ_TAG_PATTERN.test(bizTag) ? undefined : null;
    if (Date.now() - cached.at >= CACHE_MS && !this.loading.has(bizTag)) this.load(bizTag).catch(() => undefined);
    return this.verdict(bizTag, cached.access, presented);
  }

  private verdict(bizTag: string, access: Access, presented: string | undefined): IdmintError | null {
    if (!access.closed) return null;
    if (presented === undefined) return new IdmintError('UNAUTHORIZED', `tag "${bizTag}" requires a tag token: add ?token=... or an X-Idmint-Token header`);
    return access.hashes.has(createHash('sha256').update(presented).digest('hex')) ? null : new IdmintError('UNAUTHORIZED', `wrong tag token for tag "${bizTag}" (unknown or revoked)`);
  }

  /**
   * Caches every tag's access it does not hold yet (never over a fresher answer), so that while
   * Postgres is down a tag this process has not served yet is still checked, not refused.
   */
  async preloadAll(): Promise<void> {
    const before = this.changes;
    const all = await this.store.accessAll();
    // A change made here meanwhile (a revoke): this listing may predate it; the next one will not.
    if (this.changes !== before) return;
    const at = Date.now();
    for (const [bizTag, found] of all) {
      if (this.cache.has(bizTag) || this.loading.has(bizTag)) continue;
      if (this.cache.size >= MAX_CACHED) return;
      this.cache.set(bizTag, { at, access: { closed: found.closed, hashes: new Set(found.hashes) } });
    }
  }

  /** Drops the cached hashes (after a change in this process). */
  invalidate(bizTag: string): void {
    this.changes++;
    this.cache.delete(bizTag);
    // A reload started before the change must not cache what it read.
    this.loading.delete(bizTag);
  }

  /** The tag's access: one query at a time per tag, shared by everyone who asks meanwhile. */
  private load(bizTag: string): Promise<Access> {
    let pending = this.loading.get(bizTag);
    if (pending) return pending;
    const current = (): boolean => this.loading.get(bizTag) === pending;
    pending = this.store.access(bizTag).then(
      (found) => {
        const access: Access = { closed: found.closed, hashes: new Set(found.hashes) };
        if (!current()) return access;
        this.loading.delete(bizTag);
        if (this.cache.size >= MAX_CACHED) this.cache.clear();
        this.cache.set(bizTag, { at: Date.now(), access });
        return access;
      },
      (err: unknown) => {
        if (current()) this.loading.delete(bizTag);
        const cached = this.cache.get(bizTag);
        if (!cached) throw err;
        return cached.access;
      },
    );
    this.loading.set(bizTag, pending);
    return pending;
  }
}

/**
 * Admin routes: create (shown once), list and revoke a tag's tokens, and open a tag again.
 * Rotation is create, deploy, revoke. Revoking the last token leaves the tag closed to everyone
 * (what an operator does when that token leaks); `DELETE …/tokens` opens it on purpose.
 */
export async function tokenRoutes(app: FastifyInstance, options: { tokens: TagTokenStore; gate: TokenGate; authorize: (request: FastifyRequest) => void }): Promise<void> {
  const { tokens, gate } = options;
  app.addHook('onRequest', async (request) => options.authorize(request));
  const json = (t: TagTokenInfo) => ({ id: t.id, prefix: t.prefix, createdAt: t.createdAt.toISOString(), ...(t.revokedAt ? { revokedAt: t.revokedAt.toISOString() } : {}) });

  app.post<{ Params: { bizTag: string } }>('/v1/biz/:bizTag/tokens', async (request, reply) => {
    const bizTag = parseBizTag(request.params.bizTag);
    const created = await tokens.create(bizTag);
    gate.invalidate(bizTag);
    return reply.status(201).send({ ...json(created), token: created.token });
  });
  app.get<{ Params: { bizTag: string } }>('/v1/biz/:bizTag/tokens', async (request) => ({ tokens: (await tokens.list(parseBizTag(request.params.bizTag))).map(json) }));
  app.delete<{ Params: { bizTag: string; id: string } }>('/v1/biz/:bizTag/tokens/:id', async (request, reply) => {
    const bizTag = parseBizTag(request.params.bizTag);
    await tokens.revoke(bizTag, request.params.id);
    gate.invalidate(bizTag);
    return reply.status(204).send();
  });
  app.delete<{ Params: { bizTag: string } }>('/v1/biz/:bizTag/tokens', async (request) => {
    const bizTag = parseBizTag(request.params.bizTag);
    const removed = await tokens.open(bizTag);
    gate.invalidate(bizTag);
    return { bizTag, open: true, removed };
  });
}
