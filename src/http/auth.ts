import { createHash, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import type { FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { IdmintError, isIdmintError } from '../core/errors.js';

export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1';
}

/** Compares secrets in constant time, lengths included (both sides are hashed to 32 bytes first). */
export function sameSecret(given: string, expected: string): boolean {
  const digest = (s: string): Buffer => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

/**
 * Admin check: `Authorization: Bearer <token>`, or HTTP basic auth with any user and the
 * token as password (browsers opening /ui). With no token configured the server only
 * starts on loopback, and then admin routes are open to local callers.
 */
export function makeAdminGuard(token: string | undefined): (request: FastifyRequest) => void {
  return makeTokenGuard(token, { variable: 'IDMINT_ADMIN_TOKEN', what: 'admin token' });
}

/** The same check for another secret (IDMINT_METRICS_TOKEN), whose refusals name it. */
export function makeTokenGuard(token: string | undefined, names: { variable: string; what: string }): (request: FastifyRequest) => void {
  return (request) => {
    if (token === undefined) return;
    const header = request.headers.authorization ?? '';
    // Exactly `Bearer <token>`, or `Basic <base64 of user:password>`: nothing before or after.
    const bearer = /^Bearer ([\x21-\x7e]+)$/i.exec(header)?.[1];
    if (bearer !== undefined && sameSecret(bearer, token)) return;
    const basic = /^Basic ([A-Za-z0-9+/]+={0,2})$/i.exec(header)?.[1];
    if (basic !== undefined) {
      const decoded = Buffer.from(basic, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      if (colon >= 0 && sameSecret(decoded.slice(colon + 1), token)) return;
    }
    throw new IdmintError(
      'UNAUTHORIZED',
      header === '' ? `missing Authorization header: send "Authorization: Bearer <${names.variable}>"` : `wrong ${names.what}`,
    );
  };
}

/**
 * An onRequest hook for pages a browser opens (`/ui`, `/status`): the admin check, answered with
 * a basic-auth challenge so the browser asks for a password (any user, the token as password).
 */
export function browserAdminHook(authorize: (request: FastifyRequest) => void): onRequestAsyncHookHandler {
  return async (request, reply) => {
    try {
      authorize(request);
    } catch (err) {
      const error = isIdmintError(err) ? err : new IdmintError('UNAUTHORIZED', 'admin token required');
      return reply.code(error.status).header('www-authenticate', 'Basic realm="idmint", charset="UTF-8"').send(error.toJSON());
    }
  };
}

export function assertAdminExposureSafe(host: string, token: string | undefined): void {
  if (token === undefined && !isLoopback(host)) {
    throw new IdmintError(
      'BAD_REQUEST',
      `IDMINT_ADMIN_TOKEN is required when IDMINT_HOST (${host}) is not a loopback address: set a token of 8+ characters, or bind to 127.0.0.1`,
    );
  }
}
