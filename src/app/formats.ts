import { createHmac } from 'node:crypto';
import Sqids from 'sqids';
import { IdmintError } from '../core/errors.js';
import { FEISTEL_ROUNDS, FeistelPermutation } from '../core/format/feistel.js';
import { createCodec, needsKey, type IdCodec, type IdFormat } from '../core/format/format.js';
import { MAX_SEGMENT_ID, type BizTag } from '../core/ports.js';

/** Where the deployment records its obfuscation key's fingerprint (idmint_setting). */
export const KEY_FINGERPRINT_SETTING = 'obfuscation-key-fingerprint';

/** A keyed hash of a fixed label: tells two keys apart without revealing either. */
export function keyFingerprint(key: string): string {
  return createHmac('sha256', key).update('idmint-obfuscation-key-fingerprint:v1').digest('hex').slice(0, 32);
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
  private readonly fingerprint: string | undefined;

  /**
   * @param refusal why this process must not use its key now (the deployment record holds
   * another, see src/core/deployment.ts): its obfuscated tags are then refused, never served
   * with another permutation.
   */
  constructor(
    private readonly key: string | undefined,
    private readonly keyRefusal: () => string | undefined = () => undefined,
  ) {
    this.fingerprint = key ? keyFingerprint(key) : undefined;
  }

  /** This process's key fingerprint, stamped on the obfuscated tags it creates (undefined without a key). */
  get keyFingerprint(): string | undefined {
    return this.fingerprint;
  }

  /** The tag's codec, or undefined for plain decimal IDs. Throws NOT_READY when this process cannot serve its format. */
  codecFor(tag: BizTag): IdCodec | undefined {
    if (tag.format === 'decimal') return undefined;
    if (needsKey(tag.format)) this.assertKeyFor(tag);
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

  /** Why this server cannot create a tag of this format (no key, or not the deployment's), or undefined. */
  refusal(format: IdFormat): string | undefined {
    if (!needsKey(format)) return undefined;
    if (!this.key) return `format "${format}" needs a secret key: set IDMINT_OBFUSCATION_KEY on every idmint process`;
    return this.keyRefusal();
  }

  /**
   * A key-permuted tag is served only with the key it was created with (its fingerprint is on the
   * tag) and only while this process's key agrees with the deployment record. Not the caller's
   * fault either way: NOT_READY (503), naming the variable.
   */
  private assertKeyFor(tag: BizTag): void {
    if (!this.key)
      throw new IdmintError(
        'NOT_READY',
        `tag "${tag.bizTag}" hands out ${tag.format} IDs, and IDMINT_OBFUSCATION_KEY is not set on this process; set it as on every other process of the deployment`,
      );
    const refused = this.keyRefusal();
    if (refused) throw new IdmintError('NOT_READY', refused);
    if (tag.keyFingerprint && tag.keyFingerprint !== this.fingerprint) {
      throw new IdmintError(
        'NOT_READY',
        `tag "${tag.bizTag}" was created with another IDMINT_OBFUSCATION_KEY (fingerprint ${tag.keyFingerprint.slice(0, 8)}…, this process ${this.fingerprint?.slice(0, 8)}…): its IDs are refused here, as two keys would hand out the same IDs; set the deployment's key on this process`,
      );
    }
  }

  private roundKeys(bizTag: string): number[] {
    const digest = createHmac('sha256', this.key as string)
      .update(`idmint-format:v1:${bizTag}`)
      .digest();
    return Array.from({ length: FEISTEL_ROUNDS }, (_, i) => digest.readUInt32BE(i * 4));
  }
}
