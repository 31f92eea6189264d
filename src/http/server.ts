import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { IdmintError } from '../core/errors.js';
import type { BizStore, BizTag } from '../core/types.js';
import type { Dispenser } from '../dispenser.js';
import { silentLogger, type Logger } from '../log.js';
import { assertAdminExposureSafe, makeAdminGuard } from './auth.js';
import { installErrorHandling } from './errors.js';
import { bizRoutes } from './routes-biz.js';
import { idRoutes } from './routes-ids.js';

export interface ReadinessReport {
  /** `degraded`: serving by fallback (e.g. Redis down); `not_ready`: cannot serve. */
  status: 'ready' | 'degraded' | 'not_ready';
  checks: Record<string, { ok: boolean; message?: string }>;
}

export interface HttpServerOptions {
  dispenser: Dispenser;
  store: BizStore;
  registry: Registry;
  decode: (id: bigint, tag: BizTag | null) => Record<string, unknown>;
  /** Bind address, used to refuse an unauthenticated admin API off loopback. */
  host: string;
  adminToken?: string;
  gatePass?: string;
  nextSnowflakeId?: () => bigint;
  readiness?: () => Promise<ReadinessReport>;
  /** `GET /v1/stats`: pool depths and refill rates. */
  stats?: () => Promise<Record<string, unknown>>;
  /** Told after a tag is created, changed or deleted here (e.g. to prime its pool). */
  onTagChange?: (bizTag: string) => void;
  /** Extra registrations (the refill dashboard at /ui), given the admin guard. */
  extensions?: Array<(app: FastifyInstance, authorize: ReturnType<typeof makeAdminGuard>) => Promise<void>>;
  /** Only /healthz, /readyz and /metrics: a process without the API role still holds its port (its ZooKeeper identity). */
  opsOnly?: boolean;
  /** Largest request body. Default 64 KiB: admin bodies are small. */
  bodyLimit?: number;
  logger?: Logger;
}

/** Builds the fastify app with DESIGN.md's HTTP contract. Not listening: call `listen()`. */
export async function buildHttpServer(options: HttpServerOptions): Promise<FastifyInstance> {
  assertAdminExposureSafe(options.host, options.adminToken);
  const logger = (options.logger ?? silentLogger).child({ component: 'http' });
  const app: FastifyInstance = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    // Per-request info logs would cost more than serving an ID; failures are logged by the error handler.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: options.bodyLimit ?? 64 * 1024,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
  });
  installErrorHandling(app);
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

  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    const report = options.readiness ? await options.readiness() : { status: 'ready' as const, checks: {} };
    return reply.status(report.status === 'not_ready' ? 503 : 200).send(report);
  });
  app.get('/metrics', async (_request, reply) => reply.type(options.registry.contentType).send(await options.registry.metrics()));
  if (options.opsOnly) return app;

  await app.register(idRoutes, {
    dispenser: options.dispenser,
    decode: options.decode,
    ...(options.nextSnowflakeId ? { nextSnowflakeId: options.nextSnowflakeId } : {}),
    ...(options.gatePass !== undefined ? { gatePass: options.gatePass } : {}),
  });
  await app.register(bizRoutes, {
    store: options.store,
    authorize,
    onChange: (tag) => {
      options.dispenser.invalidate(tag);
      options.onTagChange?.(tag);
    },
  });

  app.get('/v1/stats', async () => (options.stats ? await options.stats() : {}));

  for (const extend of options.extensions ?? []) await extend(app, authorize);
  return app;
}
