import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest, preHandlerAsyncHookHandler } from 'fastify';
import { IdmintError } from '../core/errors.js';
import { leafKeyToBizTag } from '../core/leaf-key.js';

export interface RateLimits {
  /** Requests per window one client (IP address) may make to the issuing routes; 0 = unlimited. */
  perClient: number;
  /** Requests per window for one tag, all clients together; 0 = unlimited. */
  perTag: number;
  /** Window length. Default 1000 ms. */
  windowMs?: number;
}

/** The tag a request asks for: `/v1/ids/:bizTag`, or the Leaf key's tag. */
export function requestedTag(request: FastifyRequest): string | undefined {
  const params = request.params as { bizTag?: string; key?: string };
  if (params.bizTag !== undefined) return params.bizTag;
  return params.key === undefined ? undefined : leafKeyToBizTag(params.key);
}

/** The preHandlers of each limit that is on, to put first on the routes they guard. */
export interface RateLimitHandlers {
  perClient: preHandlerAsyncHookHandler[];
  perTag: preHandlerAsyncHookHandler[];
}

/**
 * Rate limits for the routes that hand out IDs (@fastify/rate-limit, in memory per process),
 * per client and per tag, answered with 429 `RATE_LIMITED` and `Retry-After`.
 */
export async function rateLimitHandlers(app: FastifyInstance, limits: RateLimits): Promise<RateLimitHandlers> {
  const handlers: RateLimitHandlers = { perClient: [], perTag: [] };
  if (limits.perClient <= 0 && limits.perTag <= 0) return handlers;
  const timeWindow = limits.windowMs ?? 1000;
  // One plugin instance per limit: the plugin lets only the first of its own handlers count a request.
  const limiter = async (max: number, keyGenerator: (request: FastifyRequest) => string): Promise<preHandlerAsyncHookHandler> => {
    let handler: preHandlerAsyncHookHandler | undefined;
    await app.register(async (scope) => {
      await scope.register(rateLimit, {
        global: false,
        errorResponseBuilder: (_request, context) =>
          new IdmintError('RATE_LIMITED', `rate limit of ${context.max} requests per ${timeWindow} ms exceeded; retry in ${context.after}`),
      });
      handler = scope.rateLimit({ max, timeWindow, keyGenerator }) as preHandlerAsyncHookHandler;
    });
    return handler as preHandlerAsyncHookHandler;
  };
  if (limits.perClient > 0) handlers.perClient.push(await limiter(limits.perClient, (request) => request.ip));
  if (limits.perTag > 0) handlers.perTag.push(await limiter(limits.perTag, (request) => requestedTag(request) ?? ''));
  return handlers;
}
