import { BadRequestError } from '../core/errors.js';
import { BIZ_TAG_PATTERN } from '../core/ports.js';

/** Strict decimal integer parsing for query parameters: "10", not "10abc", "1e3" or " 10". */
export function parseIntParam(raw: unknown, field: string, min: number, max: number, fallback?: number): number {
  if (raw === undefined && fallback !== undefined) return fallback;
  if (typeof raw !== 'string' || !/^\d{1,16}$/.test(raw)) {
    throw new BadRequestError(`${field} must be an integer from ${min} to ${max}`, field);
  }
  const value = Number(raw);
  if (value < min || value > max) throw new BadRequestError(`${field} must be an integer from ${min} to ${max}, got ${raw}`, field);
  return value;
}

export function parseBizTag(raw: unknown, field = 'bizTag'): string {
  if (typeof raw !== 'string' || !BIZ_TAG_PATTERN.test(raw)) {
    throw new BadRequestError(`${field} must match ${BIZ_TAG_PATTERN.source} (lower-case letters, digits, '.', '_', '-'; up to 64)`, field);
  }
  return raw;
}

const MAX_ID = (1n << 63n) - 1n;

/** An ID as it travels (decimal string), parsed to bigint in [1, 2^63-1]. */
export function parseId(raw: unknown, field = 'id'): bigint {
  if (typeof raw !== 'string' || !/^\d{1,19}$/.test(raw)) throw new BadRequestError(`${field} must be a decimal integer from 1 to ${MAX_ID}`, field);
  const id = BigInt(raw);
  if (id < 1n || id > MAX_ID) throw new BadRequestError(`${field} must be a decimal integer from 1 to ${MAX_ID}`, field);
  return id;
}
