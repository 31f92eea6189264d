import type { FastifyInstance, FastifyRequest } from 'fastify';
import { issuingRoute, type IssuingGuards } from './gate-pass.js';
import { BadRequestError, UnknownBizTagError } from '../core/errors.js';
import { LEAF_KEY_PATTERN, leafKeyToBizTag } from '../core/leaf-key.js';
import type { BizTag, IdService } from '../core/ports.js';
import { parseBizTag, parseId, parseIntParam } from './params.js';
import { Pacer } from './pacer.js';

export interface IdRoutesOptions {
  dispenser: IdService;
  /** Decodes an ID by the tag's layout (or by its value when no tag is given). */
  decode: (id: bigint, tag: BizTag | null) => Record<string, unknown>;
  /** When set, `/v1/ids` requires `gatePass` to equal it (Tinyid's token, one per deployment). */
  gatePass?: string;
  /** Rate limits and tag tokens on the routes that hand out IDs. */
  guards?: IssuingGuards;
  /**
   * The tag-token check of the routes that hand out IDs, for decode by a tag: undoing a tag's
   * format (its obfuscation hides the business volume) needs what taking its IDs needs.
   */
  checkTagAccess?: (bizTag: string, request: FastifyRequest) => Promise<void>;
  /** Turns for big answers. Default a Pacer of its own. */
  pacer?: Pacer;
}

export async function idRoutes(app: FastifyInstance, options: IdRoutesOptions): Promise<void> {
  const { dispenser, decode, gatePass } = options;

  // A response schema lets fastify serialise with fast-json-stringify: the hot path's biggest cost after I/O.
  const idsSchema = {
    response: {
      200: {
        type: 'object',
        properties: { bizTag: { type: 'string' }, ids: { type: 'array', items: { type: 'string' } }, source: { type: 'string' }, format: { type: 'string' } },
        required: ['bizTag', 'ids', 'source'],
      },
    },
  };

  // Every route that hands out IDs checks the gate pass; HEAD is off so a probe never burns IDs.
  const issuing = issuingRoute(gatePass, options.guards);

  // Big answers take turns (src/http/pacer.ts): one turn to take the IDs, one to serialise them
  // (fastify does as soon as the handler resolves), so a pool's I/O between them is not paced out.
  const pacer = options.pacer ?? new Pacer();
  app.get<{ Params: { bizTag: string }; Querystring: Record<string, string | undefined> }>(
    '/v1/ids/:bizTag',
    { ...issuing, schema: idsSchema },
    async (request) => {
      const bizTag = parseBizTag(request.params.bizTag);
      const count = parseIntParam(request.query.count, 'count', 1, dispenser.maxCount, 1);
      await pacer.turn(count);
      const result = await dispenser.get(bizTag, count);
      await pacer.turn(count, 'finish');
      return result;
    },
  );

  const blocksSchema = {
    response: {
      200: {
        type: 'object',
        properties: {
          bizTag: { type: 'string' },
          blocks: { type: 'array', items: { type: 'object', properties: { start: { type: 'string' }, end: { type: 'string' } }, required: ['start', 'end'] } },
          source: { type: 'string' },
        },
        required: ['bizTag', 'blocks', 'source'],
      },
    },
  };

  // Contiguous ranges of a segment tag's IDs: the answer's size does not grow with count.
  app.get<{ Params: { bizTag: string }; Querystring: Record<string, string | undefined> }>(
    '/v1/blocks/:bizTag',
    { ...issuing, schema: blocksSchema },
    async (request) => {
      const bizTag = parseBizTag(request.params.bizTag);
      const count = parseIntParam(request.query.count, 'count', 1, dispenser.maxBlockCount, 1);
      const result = await dispenser.getBlocks(bizTag, count);
      return { bizTag: result.bizTag, blocks: result.blocks.map((b) => ({ start: String(b.start), end: String(b.end) })), source: result.source };
    },
  );

  app.get<{ Params: { id: string }; Querystring: { bizTag?: string } }>('/v1/decode/:id', async (request) => {
    let tag: BizTag | null = null;
    if (request.query.bizTag !== undefined) {
      const bizTag = parseBizTag(request.query.bizTag);
      // Before the lookup, as on the ID routes: an unauthorized caller learns nothing of the tag.
      await options.checkTagAccess?.(bizTag, request);
      tag = await dispenser.tag(bizTag);
      if (!tag) throw new UnknownBizTagError(bizTag);
    }
    // A formatted tag's IDs are decoded back to the raw ID first (BAD_REQUEST naming the format otherwise).
    const codec = tag ? dispenser.codecFor(tag) : undefined;
    if (codec) {
      const raw = BigInt(codec.decode(request.params.id));
      // The layout's fields describe the raw ID; `id` stays the one asked about (README, "ID formats").
      const { id: _raw, ...fields } = decode(raw, tag);
      return { id: request.params.id, raw: raw.toString(), format: codec.format, ...fields };
    }
    if (!tag && !/^\d+$/.test(request.params.id)) {
      // Not decimal: perhaps a formatted tag's ID (base62, sqids...), which only its tag can decode.
      throw new BadRequestError(
        `id must be a decimal integer from 1 to ${(1n << 63n) - 1n}; a formatted tag's ID (base62, sqids) decodes with its tag: add ?bizTag=<tag>`,
        'id',
      );
    }
    const id = parseId(request.params.id);
    return { id: id.toString(), ...decode(id, tag) };
  });

  // Leaf-compatible routes: plain-text IDs, so a Leaf user switches without code changes.
  app.get<{ Params: { key: string } }>('/api/segment/get/:key', issuing, async (request, reply) => {
    // Leaf's key rules (any case, up to 128 characters), mapped to the tag `idmint import leaf` made.
    const key = request.params.key;
    if (!LEAF_KEY_PATTERN.test(key)) throw new BadRequestError('key must be 1 to 128 printable characters without spaces or /, as in Leaf', 'key');
    const result = await dispenser.get(leafKeyToBizTag(key), 1);
    return reply.type('text/plain; charset=utf-8').send(result.ids[0]);
  });
}
