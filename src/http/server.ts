import type { FastifyInstance, FastifyRequest, preHandlerHookHandler } from 'fastify';
import type { Registry } from 'prom-client';
import { IdmintError } from '../core/errors.js';
import type { BizStore, BizTag, ChangeFeed, IdService, TagAdmin, TagTokenStore } from '../core/ports.js';
import type { Logger } from '../core/logger.js';
import { assertAdminExposureSafe, makeAdminGuard } from './auth.js';
import { createFastify, opsRoutes, type ConnectionLimits, type ReadinessReport } from './base.js';
import { openApi } from './openapi.js';
import { Pacer } from './pacer.js';
import { bizRoutes } from './routes-biz.js';
import { idRoutes } from './routes-ids.js';
import { leafSnowflakeRoutes } from './routes-leaf-snowflake.js';
import { rateLimitHandlers, requestedTag, type RateLimits } from './rate-limits.js';
import { presentedToken, tokenRoutes, TokenGate } from './tag-tokens.js';
import type { DecodedId } from '../core/layout.js';

/** How often a server lists every tag's token access into its gate. */
const TAG_ACCESS_EVERY_MS = 60_000;

export type { ReadinessReport };

export interface HttpServerOptions {
  dispenser: IdService & TagAdmin;
  store: BizStore;
  registry: Registry;
  /** What `/metrics` serves, when not `registry` alone (a process of an IDMINT_PROCESSES group serves the group's). */
  metricsSource?: Pick<Registry, 'contentType' | 'metrics'>;
  /** When set, `/metrics` needs it as a bearer token (IDMINT_METRICS_TOKEN). */
  metricsToken?: string;
  decode: (id: bigint, tag: BizTag | null) => Record<string, unknown>;
  /** Bind address, used to refuse an unauthenticated admin API off loopback. */
  host: string;
  adminToken?: string;
  gatePass?: string;
  nextSnowflakeId?: () => bigint;
  /** Decodes a Snowflake ID (Leaf's `/decodeSnowflakeId`). */
  decodeSnowflake: (id: bigint) => DecodedId;
  readiness?: () => Promise<ReadinessReport>;
  /** `GET /v1/stats`: pool depths and refill rates. */
  stats?: () => Promise<Record<string, unknown>>;
  /** Told after a tag is created, changed or deleted here (e.g. to prime its pool). */
  onTagChange?: (bizTag: string) => void;
  /** Extra registrations (the operator pages: /status, /dashboard, /ui), given the admin guard. */
  extensions?: Array<(app: FastifyInstance, authorize: ReturnType<typeof makeAdminGuard>) => Promise<void>>;
  /** Per-tag access tokens: a tag with tokens hands out IDs only to callers presenting one. */
  tokens?: TagTokenStore;
  /** This process's obfuscation key fingerprint, stamped on the obfuscated tags created here. */
  keyFingerprint?: string | undefined;
  /** Where pushed changes arrive (the change feed): each tag's settings and tokens are dropped at once. */
  changes?: ChangeFeed;
  /** Rate limits on the routes that hand out IDs. Default none. */
  rateLimits?: RateLimits;
  /** The package's version, shown in /openapi.json. */
  version?: string;
  /** Largest request body. Default 64 KiB: admin bodies are small. */
  bodyLimit?: number;
  /** Timeouts and the connection cap. Default CONNECTION_LIMIT_DEFAULTS. */
  limits?: ConnectionLimits;
  /** IDs' worth of big answers worked on per turn of the event loop (0 = no turns). Default PACER_DEFAULTS.sliceIds. */
  sliceIds?: number;
  logger?: Logger;
}

/**
 * Only /healthz, /readyz and /metrics: what a process without the API role serves (the refill
 * worker's metrics; a responder's ZooKeeper identity is its ip:port). Not listening.
 */
export function buildOpsServer(options: {
  registry: Pick<Registry, 'contentType' | 'metrics'>;
  readiness: () => Promise<ReadinessReport>;
  metricsToken?: string;
  host: string;
  limits?: ConnectionLimits;
  logger?: Logger;
}): FastifyInstance {
  const app = createFastify({
    component: 'http',
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.limits ? { limits: options.limits } : {}),
  });
  opsRoutes(app, { registry: options.registry, readiness: options.readiness, ...(options.metricsToken ? { metricsToken: options.metricsToken } : {}) });
  return app;
}

/** Builds the fastify app with the HTTP contract (README "HTTP API"). Not listening: call `listen()`. */
export async function buildHttpServer(options: HttpServerOptions): Promise<FastifyInstance> {
  assertAdminExposureSafe(options.host, options.adminToken);
  const app = createFastify({
    component: 'http',
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.bodyLimit ? { bodyLimit: options.bodyLimit } : {}),
    ...(options.limits ? { limits: options.limits } : {}),
  });
  // An empty JSON body (DELETE from clients that always send Content-Type) means "no body".
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    if (body === '') return done(null, undefined);
    try {
      done(null, JSON.parse(body as string));
    } catch {
      done(new IdmintError('BAD_REQUEST', 'body: body is not valid JSON'), undefined);
    }
  });
  const authorize = makeAdminGuard(options.adminToken);

  await openApi(app, options.version);
  opsRoutes(app, {
    registry: options.metricsSource ?? options.registry,
    ...(options.readiness ? { readiness: options.readiness } : {}),
    ...(options.metricsToken ? { metricsToken: options.metricsToken } : {}),
  });

  const gate = options.tokens ? new TokenGate(options.tokens) : undefined;
  if (gate && options.changes) {
    const unsubscribe = options.changes.subscribe({
      change: (c) => c.table === 'idmint_tag_token' && c.bizTag !== undefined && gate.invalidate(c.bizTag),
      reset: () => gate.invalidateAll(),
    });
    app.addHook('onClose', async () => unsubscribe());
  }
  if (gate) {
    // Every tag's access, at start and once a minute: known ahead of a Postgres outage.
    const preload = (): void =>
      void gate.preloadAll().catch((err: unknown) => app.log.debug({ err: (err as Error).message }, 'listing tag tokens failed; known tags stay cached'));
    preload();
    const timer = setInterval(preload, TAG_ACCESS_EVERY_MS);
    timer.unref();
    app.addHook('onClose', async () => clearInterval(timer));
  }
  // A callback hook: a tag whose hashes are cached is checked without a promise per request.
  const checkTagToken: preHandlerHookHandler = (request, _reply, done) => {
    const bizTag = requestedTag(request);
    if (!gate || bizTag === undefined) return done();
    const presented = presentedToken(request);
    const cached = gate.checkCached(bizTag, presented);
    if (cached !== undefined) return cached ? done(cached) : done();
    gate.check(bizTag, presented).then(() => done(), done);
  };
  const limits = options.rateLimits ? await rateLimitHandlers(app, options.rateLimits) : { perClient: [], perTag: [] };
  const guards = { before: [...limits.perClient, ...limits.perTag], after: gate ? [checkTagToken] : [] };
  await app.register(idRoutes, {
    dispenser: options.dispenser,
    decode: options.decode,
    guards,
    pacer: new Pacer(options.sliceIds === undefined ? {} : { sliceIds: options.sliceIds }),
    ...(options.gatePass !== undefined ? { gatePass: options.gatePass } : {}),
    ...(gate ? { checkTagAccess: (bizTag: string, request: FastifyRequest) => gate.check(bizTag, presentedToken(request)) } : {}),
  });
  if (options.tokens && gate) {
    const tokens = options.tokens;
    await app.register(async (scope) => tokenRoutes(scope, { tokens, gate, authorize }));
  }
  await app.register(leafSnowflakeRoutes, {
    decode: options.decodeSnowflake,
    // Per client only: Leaf ignores the key of a Snowflake request, so it names no tag to count or guard.
    guards: { before: limits.perClient },
    ...(options.nextSnowflakeId ? { nextId: options.nextSnowflakeId } : {}),
    ...(options.gatePass !== undefined ? { gatePass: options.gatePass } : {}),
  });
  await app.register(bizRoutes, {
    store: options.store,
    authorize,
    poolRefusal: (pool) => options.dispenser.poolRefusal(pool),
    formatRefusal: (format) => options.dispenser.formatRefusal(format),
    keyFingerprint: options.keyFingerprint,
    onChange: async (tag, change) => {
      // IDs buffered or pooled here lie below raised counters: drop them (gaps) before priming.
      if (change?.countersRaised) await options.dispenser.forget(tag);
      else options.dispenser.invalidate(tag);
      options.onTagChange?.(tag);
    },
  });

  // Every tag's depths and queue counts: operators only.
  app.get('/v1/stats', { preHandler: async (request) => authorize(request) }, async () => (options.stats ? await options.stats() : {}));

  for (const extend of options.extensions ?? []) await extend(app, authorize);
  return app;
}
