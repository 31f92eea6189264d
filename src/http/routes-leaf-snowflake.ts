import type { FastifyInstance } from 'fastify';
import { BadRequestError, IdmintError } from '../core/errors.js';
import { MIN_TIME_BASED_ID, type DecodedId } from '../core/layout.js';
import { issuingRoute, type IssuingGuards } from './gate-pass.js';
import { parseId } from './params.js';

export interface LeafSnowflakeRoutesOptions {
  /** One Snowflake ID; absent when the process runs no generator. */
  nextId?: () => bigint;
  /** Decodes by the Snowflake layout. */
  decode: (id: bigint) => DecodedId;
  gatePass?: string;
  /** The per-client rate limit every route that hands out IDs obeys. */
  guards?: IssuingGuards;
  /** Called once per ID issued (metrics). */
  onIssued?: () => void;
}

/**
 * Leaf's Snowflake routes, the same on the API server and the standalone Snowflake server:
 * `/api/snowflake/get/:key` (a plain-text ID, the key ignored as Leaf does) and
 * `/decodeSnowflakeId` in Leaf's shape.
 */
export async function leafSnowflakeRoutes(app: FastifyInstance, options: LeafSnowflakeRoutesOptions): Promise<void> {
  const { nextId, decode, onIssued } = options;

  app.get<{ Params: { key: string } }>('/api/snowflake/get/:key', issuingRoute(options.gatePass, options.guards), async (_request, reply) => {
    if (!nextId) throw new IdmintError('NOT_READY', 'this process runs no Snowflake generator');
    const id = nextId();
    onIssued?.();
    return reply.type('text/plain; charset=utf-8').send(id.toString());
  });

  app.get<{ Querystring: { snowflakeId?: string } }>('/decodeSnowflakeId', async (request) => {
    if (request.query.snowflakeId === undefined) throw new BadRequestError('snowflakeId is required', 'snowflakeId');
    const id = parseId(request.query.snowflakeId, 'snowflakeId');
    // Always by the Snowflake layout, as Leaf does; an ID below 2^53 is not a Snowflake ID (invariant 4).
    if (id < MIN_TIME_BASED_ID) throw new BadRequestError(`id ${id} is below 2^53, so it is not a Snowflake ID`, 'snowflakeId');
    const fields = decode(id);
    // Leaf's shape: timestamp "<ms>(<local time>)", workerId, sequenceId, all strings.
    return {
      timestamp: `${fields.timestamp}(${new Date(fields.timestamp).toISOString()})`,
      workerId: String(fields.worker),
      sequenceId: String(fields.sequence),
    };
  });
}
