import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { silentLogger, type Logger } from '../core/logger.js';
import { installErrorHandling } from './errors.js';

export interface ReadinessReport {
  /** `degraded`: serving by fallback (e.g. Redis down); `not_ready`: cannot serve. */
  status: 'ready' | 'degraded' | 'not_ready';
  checks: Record<string, { ok: boolean; message?: string }>;
}

/** The fastify settings every idmint server shares: logging, error envelope, graceful close. */
export function createFastify(options: { logger?: Logger; component: string; bodyLimit?: number }): FastifyInstance {
  const app: FastifyInstance = Fastify({
    loggerInstance: (options.logger ?? silentLogger).child({ component: options.component }) as unknown as FastifyBaseLogger,
    // Per-request info logs would cost more than serving an ID; failures are logged by the error handler.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: options.bodyLimit ?? 64 * 1024,
    // Leaf keys run to 128 characters; fastify's default allows 100.
    maxParamLength: 256,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
  });
  installErrorHandling(app);
  return app;
}

/** `/healthz`, `/readyz` (503 when not ready) and `/metrics`, on every server. */
export function opsRoutes(app: FastifyInstance, options: { registry: Registry; readiness?: () => Promise<ReadinessReport> }): void {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    const report = options.readiness ? await options.readiness() : { status: 'ready' as const, checks: {} };
    return reply.status(report.status === 'not_ready' ? 503 : 200).send(report);
  });
  app.get('/metrics', async (_request, reply) => reply.type(options.registry.contentType).send(await options.registry.metrics()));
}
