import type { FastifyInstance } from 'fastify';
import { Counter, Registry } from 'prom-client';
import { collectProcessMetrics } from '../dispenser/metrics.js';
import type { Logger } from '../core/logger.js';
import type { SnowflakeSource } from '../dispenser/sources/snowflake.js';
import { createFastify, opsRoutes, type ConnectionLimits } from './base.js';
import { leafSnowflakeRoutes } from './routes-leaf-snowflake.js';
import { rateLimitHandlers, type RateLimits } from './rate-limits.js';

export interface SnowflakeServerOptions {
  source: SnowflakeSource;
  /** When set, `/api/snowflake/get/:key` requires `gatePass=<this>`, as on the API server. */
  gatePass?: string;
  /** The per-client rate limit (`perTag` does not apply: the route's key names no tag). Default none. */
  rateLimits?: RateLimits;
  /** When set, `/metrics` needs it as a bearer token (IDMINT_METRICS_TOKEN). */
  metricsToken?: string;
  /** Timeouts and the connection cap. Default CONNECTION_LIMIT_DEFAULTS. */
  limits?: ConnectionLimits;
  logger?: Logger;
  registry?: Registry;
}

/**
 * Leaf's snowflake mode on its own: the same Leaf Snowflake routes as the API server (gate pass,
 * per-client rate limit, no HEAD), health and metrics. No database, no pools.
 */
export async function buildSnowflakeServer(options: SnowflakeServerOptions): Promise<FastifyInstance> {
  const { source } = options;
  const registry = options.registry ?? new Registry();
  collectProcessMetrics(registry);
  const issued = new Counter({ name: 'idmint_snowflake_ids_total', help: 'Snowflake IDs issued by this server', registers: [registry] });
  const app = createFastify({
    component: 'snowflake-http',
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.limits ? { limits: options.limits } : {}),
  });
  opsRoutes(app, {
    registry,
    ...(options.metricsToken ? { metricsToken: options.metricsToken } : {}),
    readiness: async () => ({ status: 'ready', checks: { snowflake: { ok: true, message: `worker ${source.workerId} from ${source.lease.provider}` } } }),
  });
  const limits = options.rateLimits ? await rateLimitHandlers(app, { ...options.rateLimits, perTag: 0 }) : undefined;
  await app.register(leafSnowflakeRoutes, {
    nextId: () => source.nextId(),
    ...(limits ? { guards: { before: limits.perClient } } : {}),
    decode: (id) => source.decode(id),
    onIssued: () => issued.inc(),
    ...(options.gatePass !== undefined ? { gatePass: options.gatePass } : {}),
  });
  return app;
}
