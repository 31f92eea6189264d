import { BadRequestError } from '../core/errors.js';
import { ID_FORMATS, type IdFormat } from '../core/format/format.js';
import {
  BIZ_TAG_PATTERN,
  type BizMode,
  type BizTagInput,
  type BizTagPatch,
  type FallbackPolicy,
  hasCounter,
  MAX_SEGMENT_ID,
  MAX_SHARDS,
  MAX_STEP,
  type PoolKind,
} from '../core/ports.js';
import { defaults } from '../core/options.js';

export const BIZ_MODES = Object.freeze(['segment', 'snowflake', 'uid', 'sharded'] as const satisfies readonly BizMode[]);
export const FALLBACK_POLICIES = Object.freeze(['segment', 'snowflake', 'error'] as const satisfies readonly FallbackPolicy[]);
export const POOL_KINDS = Object.freeze(['auto', 'memory', 'redis-list', 'redis-counter', 'kafka'] as const satisfies readonly PoolKind[]);

/** Most shards a tag may have: the `sharded` layout has 6 shard bits. */
export { MAX_STEP };
export const MAX_DESCRIPTION_LENGTH = 1024;

/** What a created tag gets for each field the input leaves out. */
export { MAX_SHARDS };

export const BIZ_DEFAULTS = defaults({
  mode: 'segment' as BizMode,
  step: 1000,
  maxLimit: null as number | null,
  shards: 1,
  fallback: 'snowflake' as FallbackPolicy,
  pool: 'auto' as PoolKind,
  format: 'decimal' as IdFormat,
  description: '',
  startAfter: 0,
});

export type ValidBizInput = Required<Omit<BizTagInput, 'keyFingerprint'>>;

export function validateBizTag(bizTag: unknown, field = 'bizTag'): string {
  if (typeof bizTag !== 'string' || !BIZ_TAG_PATTERN.test(bizTag)) {
    throw new BadRequestError(`${field} must match ${String(BIZ_TAG_PATTERN)}, got ${show(bizTag)}`, field);
  }
  return bizTag;
}

export function validateStep(step: unknown, field = 'step'): number {
  return intInRange(step, field, 1, MAX_STEP);
}

export function validateShard(shard: unknown, field = 'shard'): number {
  return intInRange(shard, field, 0, MAX_SHARDS - 1);
}

/** Full input for a new tag, defaults filled in; throws BadRequestError naming the first bad field. */
export function validateBizInput(input: BizTagInput): ValidBizInput {
  if (typeof input !== 'object' || input === null) throw new BadRequestError('the tag must be an object', 'body');
  const bizTag = validateBizTag(input.bizTag);
  const given = validateBizPatch(input, ['bizTag', 'keyFingerprint'], { allowMode: true });
  // A hard limit rules out the Snowflake fallback (its IDs are ≥ 2^53): default to segment instead.
  const fallback = given.fallback ?? (given.maxLimit != null ? 'segment' : BIZ_DEFAULTS.fallback);
  const tag: ValidBizInput = { bizTag, ...BIZ_DEFAULTS, ...given, fallback };
  assertCoherent(tag);
  return tag;
}

/**
 * Rules across fields, checked on create and after every update (invariants 1 and 5):
 * only sharded tags have shards (a segment tag's shards would count from 1 each and repeat),
 * and a tag with a hard limit cannot fall back to Snowflake IDs, which lie above any limit.
 */
export function assertCoherent(tag: Pick<ValidBizInput, 'mode' | 'shards' | 'maxLimit' | 'fallback'> & { startAfter?: number | undefined }): void {
  if (tag.startAfter && !hasCounter(tag.mode)) {
    throw new BadRequestError(`startAfter applies to segment and sharded tags; a ${tag.mode} tag has no counter`, 'startAfter');
  }
  if (tag.startAfter && tag.maxLimit !== null && tag.startAfter >= tag.maxLimit) {
    throw new BadRequestError(`startAfter ${tag.startAfter} leaves no IDs under maxLimit ${tag.maxLimit}`, 'startAfter');
  }
  if (tag.shards > 1 && tag.mode !== 'sharded') {
    throw new BadRequestError(`shards must be 1 for a ${tag.mode} tag; only sharded tags have shards`, 'shards');
  }
  if (tag.maxLimit !== null && (tag.mode === 'snowflake' || tag.mode === 'uid')) {
    throw new BadRequestError(`maxLimit applies to segment and sharded tags; a ${tag.mode} tag's IDs are time-based and would not honour it`, 'maxLimit');
  }
  if (tag.maxLimit !== null && tag.fallback === 'snowflake') {
    throw new BadRequestError('fallback "snowflake" issues IDs of 2^53 and up, above maxLimit; use fallback "segment" or "error"', 'fallback');
  }
}

/** The fields a patch sets (undefined ones are left out); `maxLimit: null` means "no limit". */
export function validateBizPatch(patch: BizTagPatch, allowExtra: readonly string[] = [], options: { allowMode?: boolean } = {}): BizTagPatch {
  if (typeof patch !== 'object' || patch === null) throw new BadRequestError('the patch must be an object', 'body');
  const known = new Set(['mode', 'step', 'maxLimit', 'shards', 'fallback', 'pool', 'format', 'description', 'startAfter', ...allowExtra]);
  for (const key of Object.keys(patch)) {
    if (!known.has(key)) throw new BadRequestError(`unknown field "${key}"`, key);
  }
  const out: BizTagPatch = {};
  if (patch.mode !== undefined) {
    // Modes number their IDs differently (sharded shifts, uid and Snowflake overlap): a change could repeat IDs.
    if (!options.allowMode) throw new BadRequestError('mode cannot change once a tag exists (its IDs could repeat); create a new tag instead', 'mode');
    out.mode = oneOf(patch.mode, 'mode', BIZ_MODES);
  }
  if (patch.format !== undefined) {
    // IDs already handed out in one format must keep decoding: the format is chosen once.
    if (!options.allowMode)
      throw new BadRequestError('format cannot change once a tag exists (IDs already handed out must stay decodable); create a new tag instead', 'format');
    out.format = oneOf(patch.format, 'format', ID_FORMATS);
  }
  if (patch.step !== undefined) out.step = validateStep(patch.step);
  if (patch.maxLimit !== undefined) out.maxLimit = patch.maxLimit === null ? null : intInRange(patch.maxLimit, 'maxLimit', 1, MAX_SEGMENT_ID);
  if (patch.shards !== undefined) out.shards = intInRange(patch.shards, 'shards', 1, MAX_SHARDS);
  if (patch.fallback !== undefined) out.fallback = oneOf(patch.fallback, 'fallback', FALLBACK_POLICIES);
  if (patch.pool !== undefined) out.pool = oneOf(patch.pool, 'pool', POOL_KINDS);
  if (patch.description !== undefined) {
    if (typeof patch.description !== 'string' || patch.description.length > MAX_DESCRIPTION_LENGTH) {
      throw new BadRequestError(`description must be a string of at most ${MAX_DESCRIPTION_LENGTH} characters`, 'description');
    }
    // Postgres text cannot hold NUL; say so instead of letting the database refuse it.
    if (patch.description.includes('\u0000')) throw new BadRequestError('description must not contain the NUL character (\\u0000)', 'description');
    out.description = patch.description;
  }
  if (patch.startAfter !== undefined) out.startAfter = intInRange(patch.startAfter, 'startAfter', 0, MAX_SEGMENT_ID - 1);
  return out;
}

function intInRange(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new BadRequestError(`${field} must be an integer in [${min}, ${max}], got ${show(value)}`, field);
  }
  return value;
}

function oneOf<T extends string>(value: unknown, field: string, allowed: readonly T[]): T {
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
    throw new BadRequestError(`${field} must be one of ${allowed.join(', ')}, got ${show(value)}`, field);
  }
  return value as T;
}

function show(value: unknown): string {
  if (typeof value === 'bigint') return `${value}n`;
  return JSON.stringify(value) ?? String(value);
}
