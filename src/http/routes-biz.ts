import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { BadRequestError, UnknownBizTagError } from '../core/errors.js';
import type { BizStore, BizTag, PoolKind } from '../core/ports.js';
import { BIZ_TAG_PATTERN, MAX_SEGMENT_ID } from '../core/ports.js';
import { parseBizTag } from './params.js';
import { ID_FORMATS, type IdFormat } from '../core/format/format.js';
import { MAX_SHARDS } from '../core/ports.js';

const fields = {
  mode: z.enum(['segment', 'snowflake', 'uid', 'sharded']),
  step: z.number().int().min(1).max(100_000_000),
  maxLimit: z.number().int().min(1).max(MAX_SEGMENT_ID).nullable(),
  shards: z.number().int().min(1).max(MAX_SHARDS),
  fallback: z.enum(['segment', 'snowflake', 'error']),
  pool: z.enum(['auto', 'memory', 'redis-list', 'redis-counter', 'kafka']),
  format: z.enum(ID_FORMATS),
  description: z.string().max(1024),
  startAfter: z
    .number()
    .int()
    .min(0)
    .max(MAX_SEGMENT_ID - 1),
};

const createBody = z.strictObject({ bizTag: z.string().regex(BIZ_TAG_PATTERN), ...partial(fields) });
const patchBody = z.strictObject(partial(fields));

function partial<T extends Record<string, z.ZodType>>(shape: T): { [K in keyof T]: z.ZodOptional<T[K]> } {
  return Object.fromEntries(Object.entries(shape).map(([k, v]) => [k, v.optional()])) as { [K in keyof T]: z.ZodOptional<T[K]> };
}

function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new BadRequestError('body must be a JSON object', 'body');
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const field = issue.code === 'unrecognized_keys' ? issue.keys.join(', ') : issue.path.join('.') || 'body';
  const what = issue.code === 'unrecognized_keys' ? 'is not a known field' : issue.message;
  throw new BadRequestError(`${field}: ${what}`, field);
}

/** The public JSON shape of a tag: limits as numbers (all < 2^53), dates as ISO strings. */
export function bizJson(tag: BizTag): Record<string, unknown> {
  // The floor and the key's fingerprint are the server's own bookkeeping, not the tag's contract.
  const { startAfter: _floor, keyFingerprint: _key, ...shown } = tag;
  return { ...shown, createdAt: tag.createdAt.toISOString(), updatedAt: tag.updatedAt.toISOString() };
}

export interface BizRoutesOptions {
  store: BizStore;
  authorize: (request: FastifyRequest) => void;
  /** Called after a change so this process's caches drop the tag at once; `countersRaised` after a `startAfter`. */
  onChange?: (bizTag: string, change?: { countersRaised: boolean }) => Promise<void> | void;
  /** Why a `pool` value cannot be served here (e.g. a Redis pool without Redis); undefined when it can. */
  poolRefusal?: (pool: PoolKind) => string | undefined;
  /** Why a `format` cannot be served here (an obfuscated one without IDMINT_OBFUSCATION_KEY); undefined when it can. */
  formatRefusal?: (format: IdFormat) => string | undefined;
  /** This process's obfuscation key fingerprint, stamped on the obfuscated tags it creates. */
  keyFingerprint?: string | undefined;
}

export async function bizRoutes(app: FastifyInstance, options: BizRoutesOptions): Promise<void> {
  const { store, authorize, onChange } = options;
  const checkPool = (pool: PoolKind | undefined): void => {
    const refusal = pool === undefined ? undefined : options.poolRefusal?.(pool);
    if (refusal) throw new BadRequestError(refusal, 'pool');
  };
  app.addHook('onRequest', async (request) => authorize(request));

  app.post('/v1/biz', async (request, reply) => {
    const body = parseBody(createBody, request.body);
    checkPool(body.pool);
    const formatRefusal = body.format === undefined ? undefined : options.formatRefusal?.(body.format);
    if (formatRefusal) throw new BadRequestError(formatRefusal, 'format');
    const tag = await store.createBiz(options.keyFingerprint ? { ...body, keyFingerprint: options.keyFingerprint } : body);
    onChange?.(tag.bizTag);
    return reply.status(201).send(bizJson(tag));
  });

  app.get('/v1/biz', async () => ({ tags: (await store.listBiz()).map(bizJson) }));

  app.get<{ Params: { bizTag: string } }>('/v1/biz/:bizTag', async (request) => {
    const bizTag = parseBizTag(request.params.bizTag);
    const tag = await store.getBiz(bizTag);
    if (!tag) throw new UnknownBizTagError(bizTag);
    return bizJson(tag);
  });

  app.patch<{ Params: { bizTag: string } }>('/v1/biz/:bizTag', async (request) => {
    const bizTag = parseBizTag(request.params.bizTag);
    const patch = parseBody(patchBody, request.body);
    checkPool(patch.pool);
    const tag = await store.updateBiz(bizTag, patch);
    const countersRaised = tag.countersRaised ?? patch.startAfter !== undefined;
    await onChange?.(bizTag, { countersRaised });
    return patch.startAfter === undefined ? bizJson(tag) : { ...bizJson(tag), countersRaised };
  });

  app.delete<{ Params: { bizTag: string } }>('/v1/biz/:bizTag', async (request, reply) => {
    const bizTag = parseBizTag(request.params.bizTag);
    await store.deleteBiz(bizTag);
    onChange?.(bizTag);
    return reply.status(204).send();
  });
}
