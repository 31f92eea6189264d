import type { FastifyError, FastifyInstance } from 'fastify';
import { dependencyOf, forCaller, IdmintError, isIdmintError } from '../core/errors.js';
import { outageUnderWay } from '../core/episode.js';
import { trackAllowedMethods } from './method-not-allowed.js';

/**
 * Every failure leaves as `{"error":{"code","message"}}`. A caller's mistake is a 4xx naming
 * the field; a fault of ours is a 503 with a code. Never a stack trace in a body.
 */
export function installErrorHandling(app: FastifyInstance): void {
  const lastLogged = new Map<string, { at: number; suppressed: number }>();
  app.setErrorHandler((raw: FastifyError | Error, request, reply) => {
    const error = toIdmintError(raw);
    if (error !== raw && error.status >= 500) {
      // Not one of ours (a bug or an unexpected fault) or a misconfiguration met while serving: with its stack, every time.
      request.log.error({ reqId: request.id, err: raw, code: error.code }, 'request failed');
    } else if (error.status >= 500) {
      // Expected outages (POOL_EMPTY, Redis or Postgres down): one warn line per code every 30 s, no stack.
      const seen = lastLogged.get(error.code);
      // A server's outage is logged where it is noticed (core/episode.ts), once per process.
      if (outageUnderWay(dependencyOf(error))) request.log.debug({ reqId: request.id, code: error.code, reason: error.message }, 'request failed');
      else if (seen && Date.now() - seen.at < 30_000) seen.suppressed++;
      else {
        request.log.warn({ reqId: request.id, code: error.code, reason: error.message, alsoSince: seen?.suppressed ?? 0 }, 'request failed');
        lastLogged.set(error.code, { at: Date.now(), suppressed: 0 });
      }
    } else request.log.debug({ reqId: request.id, code: error.code, reason: error.message }, 'request refused');
    // Every 503 says when to ask again: a server known to be down (an open circuit) says its probe period, anything else 1 s.
    if (error.status === 503) {
      const retryAfterMs = typeof error.details.retryAfterMs === 'number' ? error.details.retryAfterMs : 1000;
      void reply.header('retry-after', String(Math.max(1, Math.ceil(retryAfterMs / 1000))));
    }
    void reply.status(error.status).type('application/json; charset=utf-8').send(error.toJSON());
  });
  const allowedMethods = trackAllowedMethods(app);
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0];
    const allow = allowedMethods(request);
    if (allow.length > 0) {
      void reply
        .status(405)
        .header('allow', allow.join(', '))
        .send({ error: { code: 'BAD_REQUEST', message: `method ${request.method} is not allowed on ${path}; use ${allow.join(' or ')}` } });
      return;
    }
    void reply
      .status(404)
      .send({ error: { code: 'BAD_REQUEST', message: `no route ${request.method} ${path}; see /docs for the routes (OpenAPI: /openapi.json)` } });
  });
}

const FASTIFY_CLIENT_ERRORS: Record<string, string> = {
  FST_ERR_CTP_BODY_TOO_LARGE: 'request body is too large',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported Content-Type; send application/json',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'body is empty; send a JSON object',
  FST_ERR_CTP_INVALID_JSON_BODY: 'body is not valid JSON',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'Content-Length does not match the body',
};

/** The error a request's caller gets; a misconfiguration (CONFIG_INVALID) is ours to fix, never a 400 (core/errors.ts forCaller). */
export function toIdmintError(raw: unknown): IdmintError {
  if (isIdmintError(raw)) return forCaller(raw);
  const fastifyError = raw as Partial<FastifyError> & { message?: string };
  const code = fastifyError.code ?? '';
  if (code in FASTIFY_CLIENT_ERRORS) return new IdmintError('BAD_REQUEST', `body: ${FASTIFY_CLIENT_ERRORS[code]}`, { cause: raw });
  if (raw instanceof SyntaxError || (typeof fastifyError.statusCode === 'number' && fastifyError.statusCode >= 400 && fastifyError.statusCode < 500)) {
    return new IdmintError('BAD_REQUEST', fastifyError.message ?? 'bad request', { cause: raw });
  }
  return forCaller(raw);
}
