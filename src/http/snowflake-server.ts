import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { Registry, Counter, collectDefaultMetrics } from 'prom-client';
import { BadRequestError } from '../core/errors.js';
import { silentLogger, type Logger } from '../log.js';
import type { SnowflakeSource } from '../snowflake-source.js';
import { installErrorHandling } from './errors.js';
import { parseId } from './params.js';

/**
 * Leaf's snowflake mode on its own: `/api/snowflake/get/:key` (plain-text ID, key ignored as
 * Leaf does), `/decodeSnowflakeId`, health and metrics. No database, no pools.
 */
export async function buildSnowflakeServer(options: { source: SnowflakeSource; logger?: Logger; registry?: Registry }): Promise<FastifyInstance> {
  const { source } = options;
  const registry = options.registry ?? new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'idmint_' });
  const issued = new Counter({ name: 'idmint_snowflake_ids_total', help: 'Snowflake IDs issued by this server', registers: [registry] });
  const app: FastifyInstance = Fastify({
    loggerInstance: (options.logger ?? silentLogger).child({ component: 'snowflake-http' }) as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: true,
    forceCloseConnections: 'idle',
  });
  installErrorHandling(app);

  app.get('/api/snowflake/get/:key', async (_request, reply) => {
    const id = source.nextId();
    issued.inc();
    return reply.type('text/plain; charset=utf-8').send(id.toString());
  });
  app.get<{ Querystring: { snowflakeId?: string } }>('/decodeSnowflakeId', async (request) => {
    if (request.query.snowflakeId === undefined) throw new BadRequestError('snowflakeId is required', 'snowflakeId');
    const fields = source.decode(parseId(request.query.snowflakeId, 'snowflakeId'));
    return { timestamp: `${fields.timestamp}(${fields.time})`, workerId: String(fields.worker), sequenceId: String(fields.sequence) };
  });
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async () => ({ status: 'ready', checks: { snowflake: { ok: true, message: `worker ${source.workerId} from ${source.lease.provider}` } } }));
  app.get('/metrics', async (_request, reply) => reply.type(registry.contentType).send(await registry.metrics()));
  return app;
}
