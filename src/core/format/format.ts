import { BadRequestError } from '../errors.js';
import type { FeistelPermutation } from './feistel.js';

/**
 * How a tag's IDs look at the edge (HTTP, Kafka replies, decode). Pools, segments and the ledger
 * always hold raw IDs; a format is a reversible mapping applied on the way out and undone by decode.
 *  - `decimal`: the raw ID (the default).
 *  - `obfuscated`: a keyed permutation of the tag's ID space (same width, still a decimal number).
 *  - `base62`, `sqids`: short URL-safe strings of the raw ID.
 *  - `obfuscated+base62`, `obfuscated+sqids`: both.
 */
export const ID_FORMATS = ['decimal', 'obfuscated', 'base62', 'sqids', 'obfuscated+base62', 'obfuscated+sqids'] as const;
export type IdFormat = (typeof ID_FORMATS)[number];

export function needsKey(format: IdFormat): boolean {
  return format.startsWith('obfuscated');
}

/** A raw ID to its formatted form and back; decode throws BAD_REQUEST naming the format. */
export interface IdCodec {
  readonly format: IdFormat;
  encode(raw: string): string;
  decode(formatted: string): string;
}

/** What `sqids` needs from the Sqids library (kept out of the core's imports). */
export interface SqidsLike {
  encode(numbers: number[]): string;
  decode(id: string): number[];
}

export interface CodecParts {
  /** The tag's raw IDs are `[first, first + domain)`: 1.. for segment IDs, 0.. for time-based. */
  first: bigint;
  domain: bigint;
  /** Required for the obfuscated formats. */
  permutation?: FeistelPermutation;
  /** Required for the sqids formats. */
  sqids?: SqidsLike;
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const BASE62_VALUE = new Map([...BASE62].map((c, i) => [c, BigInt(i)]));
const DECIMAL = /^(0|[1-9][0-9]{0,19})$/;
const LOW32 = 0xffffffffn;

export function toBase62(n: bigint): string {
  if (n === 0n) return '0';
  let out = '';
  for (let v = n; v > 0n; v /= 62n) out = BASE62[Number(v % 62n)] + out;
  return out;
}

export function fromBase62(s: string): bigint | undefined {
  if (s.length === 0 || s.length > 11) return undefined;
  let v = 0n;
  for (const c of s) {
    const d = BASE62_VALUE.get(c);
    if (d === undefined) return undefined;
    v = v * 62n + d;
  }
  return v;
}

export function createCodec(format: IdFormat, parts: CodecParts): IdCodec {
  const { first, domain, permutation, sqids } = parts;
  const obfuscate = needsKey(format);
  if (obfuscate && !permutation) throw new BadRequestError(`format "${format}" needs a key (IDMINT_OBFUSCATION_KEY)`, 'format');
  if (format.endsWith('sqids') && !sqids) throw new BadRequestError(`format "${format}" needs the Sqids codec`, 'format');
  const last = first + domain - 1n;
  const invalid = (formatted: string): BadRequestError => new BadRequestError(`"${formatted.slice(0, 40)}" is not an ID of format ${format}`, 'id');

  const scramble = (raw: bigint): bigint => (obfuscate ? permutation!.forward(raw - first) + first : raw);
  const unscramble = (v: bigint): bigint => (obfuscate ? permutation!.inverse(v - first) + first : v);
  const toText = (v: bigint): string => {
    if (format.endsWith('base62')) return toBase62(v);
    if (format.endsWith('sqids')) return sqids!.encode(v <= BigInt(Number.MAX_SAFE_INTEGER) ? [Number(v)] : [Number(v >> 32n), Number(v & LOW32)]);
    return v.toString();
  };
  const fromText = (s: string): bigint | undefined => {
    if (format.endsWith('base62')) return fromBase62(s);
    if (format.endsWith('sqids')) {
      const numbers = sqids!.decode(s);
      // Long input decodes to numbers beyond 2^53, which Sqids' own encode refuses: not an ID.
      if (!numbers.every((n) => Number.isSafeInteger(n))) return undefined;
      // Sqids decodes some strings it would never produce; only the canonical form is an ID.
      const v =
        numbers.length === 1
          ? BigInt(numbers[0]!)
          : numbers.length === 2 && numbers[1]! <= 0xffffffff
            ? (BigInt(numbers[0]!) << 32n) | BigInt(numbers[1]!)
            : undefined;
      return v !== undefined && toText(v) === s ? v : undefined;
    }
    return DECIMAL.test(s) ? BigInt(s) : undefined;
  };

  // Segment tags (domains within 2^53) take the number path: no bigint per ID.
  if (format === 'obfuscated' && domain <= 1n << 53n) {
    const f = Number(first);
    const lastN = Number(last);
    return Object.freeze({
      format,
      encode: (raw: string) => String(permutation!.forwardNumber(Number(raw) - f) + f),
      decode: (formatted: string) => {
        const v = typeof formatted === 'string' && DECIMAL.test(formatted) ? Number(formatted) : NaN;
        if (!(v >= f && v <= lastN)) throw invalid(String(formatted));
        return String(permutation!.inverseNumber(v - f) + f);
      },
    });
  }

  return Object.freeze({
    format,
    encode: (raw: string) => toText(scramble(BigInt(raw))),
    decode: (formatted: string) => {
      const v = typeof formatted === 'string' ? fromText(formatted) : undefined;
      if (v === undefined || v < first || v > last) throw invalid(String(formatted));
      return unscramble(v).toString();
    },
  });
}
