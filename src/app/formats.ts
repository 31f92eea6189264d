import { createHmac } from 'node:crypto';
import Sqids from 'sqids';
import { BadRequestError } from '../core/errors.js';
import { FEISTEL_ROUNDS, FeistelPermutation } from '../core/format/feistel.js';
import { createCodec, needsKey, type IdCodec, type IdFormat } from '../core/format/format.js';
import { MAX_SEGMENT_ID, type BizTag } from '../core/ports.js';

/**
 * The codecs of formatted tags, built from IDMINT_OBFUSCATION_KEY (a secret: never logged or
 * returned). Round keys are derived per tag (HMAC-SHA256 of the tag name), so two tags'
 * obfuscated orders differ. The permuted domain is the tag's ID space: 1..maxLimit (2^53 - 1
 * without a limit) for segment and sharded tags, 0..2^63 - 1 for Snowflake and uid tags.
 */
export class TagFormats {
  private readonly cache = new Map<string, IdCodec>();
  private readonly sqids = new Sqids();

  constructor(private readonly key: string | undefined) {}

  /** The tag's codec, or undefined for plain decimal IDs. */
  codecFor(tag: BizTag): IdCodec | undefined {
    if (tag.format === 'decimal') return undefined;
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
    return needsKey(format) && !this.key ? `format "${format}" needs a secret key: set IDMINT_OBFUSCATION_KEY on every idmint process` : undefined;
  }

  private roundKeys(bizTag: string): number[] {
    if (!this.key) throw new BadRequestError('this tag is obfuscated but IDMINT_OBFUSCATION_KEY is not set on this process', 'format');
    const digest = createHmac('sha256', this.key).update(`idmint-format:v1:${bizTag}`).digest();
    return Array.from({ length: FEISTEL_ROUNDS }, (_, i) => digest.readUInt32BE(i * 4));
  }
}
