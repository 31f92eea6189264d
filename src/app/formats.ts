import { createHmac } from 'node:crypto';
import Sqids from 'sqids';
import { BadRequestError, IdmintError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { FEISTEL_ROUNDS, FeistelPermutation } from '../core/format/feistel.js';
import { createCodec, needsKey, type IdCodec, type IdFormat } from '../core/format/format.js';
import { MAX_SEGMENT_ID, type BizTag, type SettingRegistry } from '../core/ports.js';

/** Where the deployment records its obfuscation key's fingerprint (idmint_setting). */
export const KEY_FINGERPRINT_SETTING = 'obfuscation-key-fingerprint';

/** A keyed hash of a fixed label: tells two keys apart without revealing either. */
export function keyFingerprint(key: string): string {
  return createHmac('sha256', key).update('idmint-obfuscation-key-fingerprint:v1').digest('hex').slice(0, 32);
}

/**
 * Compares this process's IDMINT_OBFUSCATION_KEY with the one the deployment recorded (recording
 * it if this is the first process with a key). Two keys over one tag's raw IDs are two different
 * permutations, and their images overlap: a process with another key would repeat IDs. Returns why
 * this process must refuse obfuscated tags, or undefined when its key matches (or it has none).
 */
export async function checkObfuscationKey(key: string | undefined, settings: SettingRegistry, logger: Logger): Promise<string | undefined> {
  if (!key) return undefined;
  const mine = keyFingerprint(key);
  const recorded = await settings.claim(KEY_FINGERPRINT_SETTING, mine);
  if (recorded === mine) return undefined;
  const reason =
    `IDMINT_OBFUSCATION_KEY on this process differs from the key recorded for this deployment (fingerprint ${recorded.slice(0, 8)}…, this process ${mine.slice(0, 8)}…): ` +
    'obfuscated tags are refused here, as two keys would hand out the same IDs; set the same key on every process';
  logger.error({ component: 'formats', variable: 'IDMINT_OBFUSCATION_KEY' }, reason);
  return reason;
}

/**
 * The codecs of formatted tags, built from IDMINT_OBFUSCATION_KEY (a secret: never logged or
 * returned). Round keys are derived per tag (HMAC-SHA256 of the tag name), so two tags'
 * obfuscated orders differ. The permuted domain is the tag's ID space: 1..maxLimit (2^53 - 1
 * without a limit) for segment and sharded tags, 0..2^63 - 1 for Snowflake and uid tags.
 */
export class TagFormats {
  private readonly cache = new Map<string, IdCodec>();
  private readonly sqids = new Sqids();

  /**
   * @param keyMismatch why this process's key must not be used (see checkObfuscationKey): its
   * obfuscated tags are then refused, never served with another permutation.
   */
  constructor(
    private readonly key: string | undefined,
    private readonly keyMismatch?: string,
  ) {}

  /** The tag's codec, or undefined for plain decimal IDs. */
  codecFor(tag: BizTag): IdCodec | undefined {
    if (tag.format === 'decimal') return undefined;
    if (this.keyMismatch && needsKey(tag.format)) throw new IdmintError('NOT_READY', this.keyMismatch);
    const timeBased = tag.mode === 'snowflake' || tag.mode === 'uid';
    const domain = timeBased ? 1n << 63n : BigInt(tag.mode === 'segment' ? (tag.maxLimit ?? MAX_SEGMENT_ID) : MAX_SEGMENT_ID);
    const cacheKey = `${tag.bizTag}\u0000${tag.format}\u0000${domain}`;
    let codec = this.cache.get(cacheKey);
    if (!codec) {
      const first = timeBased ? 0n : 1n;
      const permutation = needsKey(tag.format) ? new FeistelPermutation(domain, this.roundKeys(tag.bizTag)) : undefined;
      codec = createCodec(tag.format, { first, domain, sqids: this.sqids, ...(permutation ? { permutation } : {}) });
      this.cache.set(cacheKey, codec);
    }
    return codec;
  }

  /** Why this server cannot serve a format (a key is needed and none is configured), or undefined. */
  refusal(format: IdFormat): string | undefined {
    if (this.keyMismatch && needsKey(format)) return this.keyMismatch;
    return needsKey(format) && !this.key ? `format "${format}" needs a secret key: set IDMINT_OBFUSCATION_KEY on every idmint process` : undefined;
  }

  private roundKeys(bizTag: string): number[] {
    if (!this.key) throw new BadRequestError('this tag is obfuscated but IDMINT_OBFUSCATION_KEY is not set on this process', 'format');
    const digest = createHmac('sha256', this.key).update(`idmint-format:v1:${bizTag}`).digest();
    return Array.from({ length: FEISTEL_ROUNDS }, (_, i) => digest.readUInt32BE(i * 4));
  }
}
