import { timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import type { FastifyRequest } from 'fastify';
import { IdmintError } from '../core/errors.js';

export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1';
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * Admin check: `Authorization: Bearer <token>`, or HTTP basic auth with any user and the
 * token as password (browsers opening /ui). With no token configured the server only
 * starts on loopback, and then admin routes are open to local callers.
 */
export function makeAdminGuard(token: string | undefined): (request: FastifyRequest) => void {
  return (request) => {
    if (token === undefined) return;
    const header = request.headers.authorization ?? '';
    const [scheme, value = ''] = header.split(' ', 2);
    if (scheme?.toLowerCase() === 'bearer' && sameSecret(value, token)) return;
    if (scheme?.toLowerCase() === 'basic') {
      const decoded = Buffer.from(value, 'base64').toString('utf8');
      const password = decoded.slice(decoded.indexOf(':') + 1);
      if (sameSecret(password, token)) return;
    }
    throw new IdmintError('UNAUTHORIZED', header === '' ? 'missing Authorization header: send "Authorization: Bearer <IDMINT_ADMIN_TOKEN>"' : 'wrong admin token');
  };
}

export function assertAdminExposureSafe(host: string, token: string | undefined): void {
  if (token === undefined && !isLoopback(host)) {
    throw new IdmintError('BAD_REQUEST', `IDMINT_ADMIN_TOKEN is required when IDMINT_HOST (${host}) is not a loopback address: set a token of 8+ characters, or bind to 127.0.0.1`);
  }
}
