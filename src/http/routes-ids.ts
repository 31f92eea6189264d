import type { FastifyInstance, FastifyRequest } from 'fastify';
import { BadRequestError, IdmintError, UnknownBizTagError } from '../core/errors.js';
import type { BizTag } from '../core/types.js';
import type { Dispenser } from '../dispenser.js';
import { parseBizTag, parseId, parseIntParam } from './params.js';

export interface IdRoutesOptions {
  dispenser: Dispenser;
  /** Decodes an ID by the tag's layout (or by its value when no tag is given). */
  decode: (id: bigint, tag: BizTag | null) => Record<string, unknown>;
  /** Leaf's `/api/snowflake/get/:key`: one Snowflake ID, whatever the key. */
  nextSnowflakeId?: () => bigint;
  /** When set, `/v1/ids` requires `gatePass` to equal it (Tinyid's token, one per deployment). */
  gatePass?: string;
}

const SNOWFLAKE_TAG = Object.freeze({ mode: 'snowflake' }) as BizTag;

export async function idRoutes(app: FastifyInstance, options: IdRoutesOptions): Promise<void> {
  const { dispenser, decode, nextSnowflakeId, gatePass } = options;

  // A response schema lets fastify serialise with fast-json-stringify: the hot path's biggest cost after I/O.
  const idsSchema = {
    response: {
      200: {
        type: 'object',
        properties: { bizTag: { type: 'string' }, ids: { type: 'array', items: { type: 'string' } }, source: { type: 'string' } },
        required: ['bizTag', 'ids', 'source'],
      },
    },
  };

  // Every route that hands out IDs checks the gate pass; HEAD is off so a probe never burns IDs.
  const checkGatePass = async (request: FastifyRequest): Promise<void> => {
    const given = (request.query as { gatePass?: string }).gatePass;
    if (gatePass !== undefined && given !== gatePass) {
      throw new IdmintError('UNAUTHORIZED', given === undefined ? 'gatePass is required on this server: add ?gatePass=...' : 'wrong gatePass');
    }
  };
  const issuing = { exposeHeadRoute: false, preHandler: checkGatePass };

  app.get<{ Params: { bizTag: string }; Querystring: Record<string, string | undefined> }>('/v1/ids/:bizTag', { ...issuing, schema: idsSchema }, async (request) => {
    const bizTag = parseBizTag(request.params.bizTag);
    const count = parseIntParam(request.query.count, 'count', 1, dispenser.maxCount, 1);
    return dispenser.get(bizTag, count);
  });

  app.get<{ Params: { id: string }; Querystring: { bizTag?: string } }>('/v1/decode/:id', async (request) => {
    const id = parseId(request.params.id);
    let tag: BizTag | null = null;
    if (request.query.bizTag !== undefined) {
      const bizTag = parseBizTag(request.query.bizTag);
      tag = await dispenser.tag(bizTag);
      if (!tag) throw new UnknownBizTagError(bizTag);
    }
    return { id: id.toString(), ...decode(id, tag) };
  });

  // Leaf-compatible routes: plain-text IDs, so a Leaf user switches without code changes.
  app.get<{ Params: { key: string } }>('/api/segment/get/:key', issuing, async (request, reply) => {
    const result = await dispenser.get(parseBizTag(request.params.key, 'key'), 1);
    return reply.type('text/plain; charset=utf-8').send(result.ids[0]);
  });

  app.get<{ Params: { key: string } }>('/api/snowflake/get/:key', issuing, async (_request, reply) => {
    if (!nextSnowflakeId) throw new IdmintError('NOT_READY', 'this process runs no Snowflake generator');
    return reply.type('text/plain; charset=utf-8').send(nextSnowflakeId().toString());
  });

  app.get<{ Querystring: { snowflakeId?: string } }>('/decodeSnowflakeId', async (request) => {
    if (request.query.snowflakeId === undefined) throw new BadRequestError('snowflakeId is required', 'snowflakeId');
    const id = parseId(request.query.snowflakeId, 'snowflakeId');
    // Always by the Snowflake layout, as Leaf does; an ID below 2^53 is refused as not a Snowflake ID.
    const fields = decode(id, SNOWFLAKE_TAG);
    // Leaf's shape: timestamp "<ms>(<local time>)", workerId, sequenceId, all strings.
    const ms = Number(fields.timestamp);
    return {
      timestamp: `${ms}(${new Date(ms).toISOString()})`,
      workerId: String(fields.worker ?? ''),
      sequenceId: String(fields.sequence ?? ''),
    };
  });
}
