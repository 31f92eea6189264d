import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';

/**
 * The HTTP contract as OpenAPI 3, generated from the route schemas as routes register:
 * `/openapi.json`, and a docs page at `/docs`. Registered before every other route.
 */
export async function openApi(app: FastifyInstance, version = 'unknown'): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'idmint',
        version,
        description: 'Distributed ID dispenser: IDs per business tag from Postgres segments, pools and Snowflake. Errors are {"error":{"code","message"}}.',
      },
      components: { securitySchemes: { admin: { type: 'http', scheme: 'bearer', description: 'IDMINT_ADMIN_TOKEN' } } },
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
