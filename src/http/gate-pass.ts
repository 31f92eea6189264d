import type { FastifyRequest, preHandlerAsyncHookHandler, preHandlerHookHandler, RouteShorthandOptions } from 'fastify';
import { sameSecret } from './auth.js';
import { IdmintError } from '../core/errors.js';

/** Checks that run on every route that hands out IDs, around the gate pass. */
export interface IssuingGuards {
  /** Before the gate pass: rate limits (cheapest, and they protect the rest). */
  before?: readonly preHandlerAsyncHookHandler[];
  /** After it: tag tokens. */
  after?: readonly preHandlerHookHandler[];
}

/**
 * Route options for every route that hands out IDs, on every server: the gate pass (Tinyid's
 * token, one per deployment) when one is set, the guards, and no HEAD route, so a probe never
 * burns an ID.
 */
export function issuingRoute(gatePass: string | undefined, guards: IssuingGuards = {}): RouteShorthandOptions {
  const checkGatePass = async (request: FastifyRequest): Promise<void> => {
    if (gatePass === undefined) return;
    const given = (request.query as { gatePass?: string }).gatePass;
    if (typeof given !== 'string' || !sameSecret(given, gatePass)) {
      throw new IdmintError('UNAUTHORIZED', given === undefined ? 'gatePass is required on this server: add ?gatePass=...' : 'wrong gatePass');
    }
  };
  // Only the hooks that check something: an empty async hook still costs a promise per request.
  const hooks = [...(guards.before ?? []), ...(gatePass === undefined ? [] : [checkGatePass]), ...(guards.after ?? [])];
  return hooks.length === 0 ? { exposeHeadRoute: false } : { exposeHeadRoute: false, preHandler: hooks };
}
