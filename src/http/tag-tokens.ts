import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { IdmintError } from '../core/errors.js';
import { BIZ_TAG_PATTERN, systemClock, type Clock, type TagAccess, type TagTokenInfo, type TagTokenStore } from '../core/ports.js';
import { BoundedCache } from '../core/bounded-cache.js';
import { checkInteger, resolveOptions } from '../core/options.js';
import { parseBizTag } from './params.js';

/** A tag's access as checked: open, or closed to all but these hashes. */
interface Access {
  readonly closed: boolean;
  readonly hashes: ReadonlySet<string>;
}

/** How long a tag's token hashes are trusted while Postgres answers (README "Tag tokens"). */
export const TOKEN_CACHE_MS = 1000;
const MAX_CACHED = 10_000;

/** Where a caller puts a tag token: `?token=` (Tinyid's) or the `X-Idmint-Token` header. */
export function presentedToken(request: FastifyRequest): string | undefined {
  const header = request.headers['x-idmint-token'];
  if (typeof header === 'string' && header !== '') return header;
  const query = (request.query as { token?: unknown }).token;
  return typeof query === 'string' && query !== '' ? query : undefined;
}

/**
 * Checks tag tokens on the routes that hand out IDs. While Postgres answers, no request is
 * checked against hashes read more than a second before (one idle longer waits for the reload,
 * shared by every request meanwhile); a tag in steady use is reloaded in the background, so it
 * never waits — a reload per request, all at once each second, was the segment route's whole p99
 * under load. A change pushed by the change feed drops the tag's hashes at once. While Postgres is
 * down the last hashes apply: a tag that had tokens keeps refusing callers without one, and a tag
 * never checked is refused (its state cannot be confirmed).
 */
export class TokenGate {
  private readonly cache: BoundedCache<Access>;
  private readonly store: TagTokenStore;
  private readonly clock: Clock;

  constructor(store: TagTokenStore, options: { clock?: Clock; boundMs?: number } = {}) {
    const o = resolveOptions({ clock: systemClock, boundMs: TOKEN_CACHE_MS }, options, (s) => checkInteger('TokenGate', s, 'boundMs', 0));
    this.store = store;
    this.clock = o.clock;
    this.cache = new BoundedCache<Access>({
      load: async (bizTag) => toAccess(await store.access(bizTag)),
      boundMs: o.boundMs,
      maxCapped: MAX_CACHED,
      clock: this.clock,
    });
  }

  async check(bizTag: string, presented: string | undefined): Promise<void> {
    if (!BIZ_TAG_PATTERN.test(bizTag)) return;
    const refusal = this.verdict(bizTag, await this.cache.get(bizTag), presented);
    if (refusal) throw refusal;
  }

  /**
   * The hot path: the verdict from hashes held within the bound, without a promise — `null` to
   * let the request through, an error to refuse it, `undefined` when they must be (re)loaded.
   */
  checkCached(bizTag: string, presented: string | undefined): IdmintError | null | undefined {
    const access = this.cache.peek(bizTag);
    if (access === undefined) return BIZ_TAG_PATTERN.test(bizTag) ? undefined : null;
    return this.verdict(bizTag, access, presented);
  }

  private verdict(bizTag: string, access: Access, presented: string | undefined): IdmintError | null {
    if (!access.closed) return null;
    if (presented === undefined) return new IdmintError('UNAUTHORIZED', `tag "${bizTag}" requires a tag token: add ?token=... or an X-Idmint-Token header`);
    return access.hashes.has(createHash('sha256').update(presented).digest('hex'))
      ? null
      : new IdmintError('UNAUTHORIZED', `wrong tag token for tag "${bizTag}" (unknown or revoked)`);
  }

  /**
   * Caches every tag's access it does not hold yet (never over a fresher answer), so that while
   * Postgres is down a tag this process has not served yet is still checked, not refused.
   */
  async preloadAll(): Promise<void> {
    const version = this.cache.changeVersion;
    const at = this.clock.now();
    const all = await this.store.accessAll();
    this.cache.seed(
      [...all].map(([bizTag, found]) => [bizTag, toAccess(found)] as [string, Access]),
      at,
      version,
    );
  }

  /** Drops the tag's hashes (a change here, or pushed from elsewhere). */
  invalidate(bizTag: string): void {
    this.cache.invalidate(bizTag);
  }

  /** Drops every tag's hashes (the change feed was lost or is back). */
  invalidateAll(): void {
    this.cache.invalidateAll();
  }
}

function toAccess(found: TagAccess): Access {
  return { closed: found.closed, hashes: new Set(found.hashes) };
}

/**
 * Admin routes: create (shown once), list and revoke a tag's tokens, and open a tag again.
 * Rotation is create, deploy, revoke. Revoking the last token leaves the tag closed to everyone
 * (what an operator does when that token leaks); `DELETE …/tokens` opens it on purpose.
 */
export async function tokenRoutes(
  app: FastifyInstance,
  options: { tokens: TagTokenStore; gate: TokenGate; authorize: (request: FastifyRequest) => void },
): Promise<void> {
  const { tokens, gate } = options;
  app.addHook('onRequest', async (request) => options.authorize(request));
  const json = (t: TagTokenInfo) => ({
    id: t.id,
    prefix: t.prefix,
    createdAt: t.createdAt.toISOString(),
    ...(t.revokedAt ? { revokedAt: t.revokedAt.toISOString() } : {}),
  });

  app.post<{ Params: { bizTag: string } }>('/v1/biz/:bizTag/tokens', async (request, reply) => {
    const bizTag = parseBizTag(request.params.bizTag);
    const created = await tokens.create(bizTag);
    gate.invalidate(bizTag);
    return reply.status(201).send({ ...json(created), token: created.token });
  });
  app.get<{ Params: { bizTag: string } }>('/v1/biz/:bizTag/tokens', async (request) => ({
    tokens: (await tokens.list(parseBizTag(request.params.bizTag))).map(json),
  }));
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
