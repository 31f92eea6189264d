import type { FastifyInstance, FastifyRequest } from 'fastify';
import Router, { type HTTPMethod } from 'find-my-way';

/**
 * Remembers every route's path per method, so a request with the wrong method gets 405 with an
 * `Allow` header (RFC 9110 §15.5.6) instead of a 404 that suggests the path does not exist.
 */
export function trackAllowedMethods(app: FastifyInstance): (request: FastifyRequest) => string[] {
  const router = Router();
  const methods = new Set<HTTPMethod>();
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat() as HTTPMethod[]) {
      if (!router.hasRoute(method, route.url)) router.on(method, route.url, () => undefined);
      methods.add(method);
    }
  });
  return (request) => {
    const path = request.url.split('?')[0] ?? '/';
    return [...methods].filter((m) => m !== request.method && router.find(m, path) !== null).sort();
  };
}
