import { z } from 'zod';
import { BIZ_TAG_PATTERN } from '../core/ports.js';
import type { IdSourceName } from '../core/ports.js';
import { BadRequestError, ERROR_CODES } from '../core/errors.js';
import type { ErrorCode } from '../core/errors.js';
import type { Block } from '../core/block.js';
import { ID_FORMATS, type IdFormat } from '../core/format/format.js';
import { KID_PATTERN, SIGNATURE_PATTERN } from './signing.js';

/**
 * The Kafka wire contract (README "Kafka API"): JSON values with `"v":1`.
 * Decoders never throw on bad input: they return a typed failure the responder can answer.
 */

export const WIRE_VERSION = 1;

/** Kafka's own topic-name rule; a replyTo outside it could never be produced to. */
export const TOPIC_NAME_PATTERN = /^[A-Za-z0-9._-]{1,249}$/;

/** Decimal string of a positive 63-bit integer (invariant 7). */
const decimalId = z.string().regex(/^[1-9][0-9]{0,18}$/, 'a decimal ID string');

export const requestSchema = z.object({
  v: z.literal(WIRE_VERSION),
  id: z.string().min(1).max(128),
  bizTag: z.string().regex(BIZ_TAG_PATTERN, 'a biz tag matching ^[a-z0-9][a-z0-9._-]{0,63}$'),
  count: z.number().int().min(1),
  replyTo: z.string().regex(TOPIC_NAME_PATTERN, 'a Kafka topic name'),
  deadline: z.number().int().nonnegative(),
  /** `blocks`: reply with contiguous ranges instead of a list (segment tags). Default `ids`. */
  as: z.enum(['ids', 'blocks']).optional(),
});
export type IdRequest = z.infer<typeof requestSchema>;

const errorCodes = Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]];

// A reply's IDs: decimal strings, or a formatted tag's form (base62, Sqids: letters and digits).
const ID_TEXT = /^[0-9A-Za-z]{1,32}$/;

/** The signature every reply and block carries (src/kafka/signing.ts): the key's id and the Ed25519 signature. */
const signed = { kid: z.string().regex(KID_PATTERN).optional(), sig: z.string().regex(SIGNATURE_PATTERN).optional() };

export const replySchema = z.union([
  z.object({
    v: z.literal(WIRE_VERSION),
    id: z.string(),
    // Checked element by element in decodeReply: a per-element schema costs double on 10,000-ID replies.
    ids: z.array(z.string()),
    source: z.enum(['pool', 'segment', 'snowflake']),
    format: z.enum(ID_FORMATS).optional(),
    ...signed,
  }),
  z.object({
    v: z.literal(WIRE_VERSION),
    id: z.string(),
    blocks: z.array(z.object({ start: decimalId, end: decimalId })),
    source: z.enum(['pool', 'segment', 'snowflake']),
    ...signed,
  }),
  z.object({
    v: z.literal(WIRE_VERSION),
    id: z.string(),
    error: z.object({ code: z.enum(errorCodes), message: z.string() }),
    ...signed,
  }),
]);
export type IdReply = z.infer<typeof replySchema>;

export const poolBlockSchema = z
  .strictObject({
    v: z.literal(WIRE_VERSION),
    bizTag: z.string().regex(BIZ_TAG_PATTERN),
    /** The tag's shard; absent means 0. */
    shard: z.number().int().min(0).optional(),
    start: decimalId,
    end: decimalId,
    /** The block's sequence along its partition (src/kafka/signing.ts `BlockPlace.seq`). */
    seq: decimalId.optional(),
    /** When it was signed, epoch ms (src/kafka/signing.ts `BlockPlace.at`). */
    at: decimalId.optional(),
    /** The signing key's id and the Ed25519 signature over the block and its place (src/kafka/signing.ts). */
    ...signed,
  })
  .refine((b) => BigInt(b.start) <= BigInt(b.end), 'start must not exceed end');
export type PoolBlock = z.infer<typeof poolBlockSchema>;

export interface DecodeLimits {
  /** Largest accepted request `count`. */
  maxCount: number;
  /** Largest accepted request size in bytes. */
  maxBytes: number;
  /** What every reply topic of the deployment starts with. Default `idmint.replies.`. */
  replyPrefix?: string;
  /** Largest `count` of an `"as":"blocks"` request. Default maxCount. */
  maxBlockCount?: number;
}

/**
 * Whether replies may go to `topic`: only a reply topic of the deployment's namespace
 * (`idmint.replies.*`, `idmint.<namespace>.replies.*`), never a topic of anyone else's that a
 * request happens to name.
 */
export function isReplyTopicAllowed(topic: string, replyPrefix = 'idmint.replies.'): boolean {
  return topic.startsWith(replyPrefix) && topic.length > replyPrefix.length;
}

export type DecodedRequest =
  | { ok: true; request: IdRequest }
  /** `replyTo`/`id` are set when they could be read, so the sender can still get an error reply. */
  | { ok: false; error: BadRequestError; replyTo?: string; id?: string };

/** Parses one request value. Never throws: a bad message is a value, not an exception. */
export function decodeRequest(value: Buffer | null, limits: DecodeLimits): DecodedRequest {
  if (value === null || value.length === 0) return { ok: false, error: new BadRequestError('empty request message', 'value') };
  if (value.length > limits.maxBytes) {
    // Too big to parse at all: the reply address is read from the first KiB, if it is there.
    const reachable = allowed(sniffReplyAddress(value.subarray(0, 1024).toString('utf8')), limits);
    return { ok: false, error: new BadRequestError(`request of ${value.length} bytes exceeds the ${limits.maxBytes}-byte limit`, 'value'), ...reachable };
  }
  let raw: unknown;
  try {
    raw = JSON.parse(value.toString('utf8'));
  } catch {
    // Not JSON, but perhaps readable enough to tell the sender so.
    return {
      ok: false,
      error: new BadRequestError('request is not valid JSON', 'value'),
      ...allowed(sniffReplyAddress(value.subarray(0, 1024).toString('utf8')), limits),
    };
  }
  const reachable = allowed(readReplyAddress(raw), limits);
  if (
    typeof (raw as { replyTo?: unknown } | null)?.replyTo === 'string' &&
    reachable.replyTo === undefined &&
    TOPIC_NAME_PATTERN.test((raw as { replyTo: string }).replyTo)
  ) {
    return {
      ok: false,
      error: new BadRequestError(`replyTo must be a reply topic of this deployment (starting with ${limits.replyPrefix ?? 'idmint.replies.'})`, 'replyTo'),
    };
  }
  const parsed = requestSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue?.path.join('.') || 'value';
    const message = field === 'v' ? `unsupported message version (expected v=${WIRE_VERSION})` : `invalid field "${field}": ${issue?.message ?? 'malformed'}`;
    return { ok: false, error: new BadRequestError(message, field), ...reachable };
  }
  const maxCount = parsed.data.as === 'blocks' ? (limits.maxBlockCount ?? limits.maxCount) : limits.maxCount;
  if (parsed.data.count > maxCount) {
    return { ok: false, error: new BadRequestError(`count ${parsed.data.count} exceeds the maximum ${maxCount}`, 'count'), ...reachable };
  }
  return { ok: true, request: parsed.data };
}

function allowed(address: { replyTo?: string; id?: string }, limits: DecodeLimits): { replyTo?: string; id?: string } {
  return address.replyTo !== undefined && !isReplyTopicAllowed(address.replyTo, limits.replyPrefix) ? {} : address;
}

function sniffReplyAddress(head: string): { replyTo?: string; id?: string } {
  const replyTo = /"replyTo"\s*:\s*"([A-Za-z0-9._-]{1,249})"/.exec(head)?.[1];
  if (replyTo === undefined) return {};
  return { replyTo, id: /"id"\s*:\s*"([^"\\]{1,128})"/.exec(head)?.[1] ?? '' };
}

/** What is needed to answer a message at all: a valid topic name and, if present, a string id. */
function readReplyAddress(raw: unknown): { replyTo?: string; id?: string } {
  if (typeof raw !== 'object' || raw === null) return {};
  const { replyTo, id } = raw as Record<string, unknown>;
  if (typeof replyTo !== 'string' || !TOPIC_NAME_PATTERN.test(replyTo)) return {};
  return { replyTo, id: typeof id === 'string' && id.length <= 128 ? id : '' };
}

export function encodeRequest(request: Omit<IdRequest, 'v'>): Buffer {
  return Buffer.from(JSON.stringify({ v: WIRE_VERSION, ...request }));
}

/** A reply's or block's signature, as it travels. */
export interface Signature {
  readonly kid: string;
  readonly sig: string;
}

export function encodeIdsReply(id: string, ids: readonly string[], source: IdSourceName, format?: string, signature?: Signature): Buffer {
  // `format` only for a formatted tag (additive).
  return Buffer.from(JSON.stringify({ v: WIRE_VERSION, id, ids, source, ...(format === undefined ? {} : { format }), ...signature }));
}

export function encodeBlocksReply(id: string, blocks: readonly Block[], source: IdSourceName, signature?: Signature): Buffer {
  return Buffer.from(
    JSON.stringify({ v: WIRE_VERSION, id, blocks: blocks.map((b) => ({ start: String(b.start), end: String(b.end) })), source, ...signature }),
  );
}

export function encodeErrorReply(id: string, code: ErrorCode, message: string, signature?: Signature): Buffer {
  return Buffer.from(JSON.stringify({ v: WIRE_VERSION, id, error: { code, message }, ...signature }));
}

const SOURCES: readonly string[] = ['pool', 'segment', 'snowflake'];

/**
 * Replies come from our own responders, but a reply topic is writable by anyone: validate.
 * The IDs path is checked by hand: it runs once per reply, on up to 10,000 strings.
 */
export function decodeReply(value: Buffer | null): IdReply | null {
  if (value === null) return null;
  let raw: unknown;
  try {
    raw = JSON.parse(value.toString('utf8'));
  } catch {
    return null;
  }
  if (typeof raw !== 'object' || raw === null) return null;
  const r = raw as Record<string, unknown>;
  if (r.v !== WIRE_VERSION || typeof r.id !== 'string') return null;
  if (!Array.isArray(r.ids)) {
    const parsed = replySchema.safeParse(raw);
    return parsed.success ? parsed.data : null;
  }
  if (typeof r.source !== 'string' || !SOURCES.includes(r.source)) return null;
  for (const id of r.ids as unknown[]) if (typeof id !== 'string' || !ID_TEXT.test(id)) return null;
  if (r.format !== undefined && (typeof r.format !== 'string' || !(ID_FORMATS as readonly string[]).includes(r.format))) return null;
  if (r.kid !== undefined && (typeof r.kid !== 'string' || !KID_PATTERN.test(r.kid))) return null;
  if (r.sig !== undefined && (typeof r.sig !== 'string' || !SIGNATURE_PATTERN.test(r.sig))) return null;
  return {
    v: WIRE_VERSION,
    id: r.id,
    ids: r.ids as string[],
    source: r.source as IdSourceName,
    ...(r.format === undefined ? {} : { format: r.format as IdFormat }),
    ...(r.kid === undefined ? {} : { kid: r.kid as string }),
    ...(r.sig === undefined ? {} : { sig: r.sig as string }),
  };
}

/** A pool block's value, signed over its place (src/kafka/signing.ts `blockBytes`). */
export function encodePoolBlock(
  bizTag: string,
  start: number | bigint,
  end: number | bigint,
  extra: { shard?: number; seq?: number | bigint | string; at?: number | string; signature?: Signature } = {},
): Buffer {
  const shard = extra.shard ? { shard: extra.shard } : {};
  const seq = extra.seq === undefined ? {} : { seq: String(extra.seq) };
  const at = extra.at === undefined ? {} : { at: String(extra.at) };
  return Buffer.from(JSON.stringify({ v: WIRE_VERSION, bizTag, ...shard, start: String(start), end: String(end), ...seq, ...at, ...extra.signature }));
}

export function decodePoolBlock(value: Buffer | null): PoolBlock | null {
  if (value === null) return null;
  try {
    const parsed = poolBlockSchema.safeParse(JSON.parse(value.toString('utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}
