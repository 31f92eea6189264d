/**
 * A keyed permutation of the integers `[0, n)`: a Feistel network over exactly the bit width that
 * holds `n - 1`, with cycle-walking (a value that lands outside `[0, n)` is permuted again until
 * it lands inside). Being a permutation, it maps distinct IDs to distinct IDs — uniqueness is kept
 * by construction — and stays inside the domain: a 32-bit ID stays a 32-bit ID, a segment ID stays
 * below 2^53. Reversible with the same key. Pure: the round keys come from the caller (derived
 * from IDMINT_OBFUSCATION_KEY outside the core).
 *
 * An odd width is split unbalanced (halves of ⌊w/2⌋ and ⌈w/2⌉ bits, each round's mix cut to
 * the width of the half it changes), so the network covers `[0, 2^w)` and not `[0, 2^(w+1))`: a domain
 * of the form 2^w - k walks once, not twice on average. Halves are at most 32 bits, so rounds run
 * on plain numbers (Math.imul), not bigint.
 */
// Luby–Rackoff: four rounds already make a strong pseudorandom permutation from a pseudorandom
// round function; six leave a margin for a round function that is a fast mix, not a cipher.
export const FEISTEL_ROUNDS = 6;

export class FeistelPermutation {
  /** Bits of the left (high) half: ⌊w/2⌋. */
  private readonly leftBits: number;
  /** Bits of the right (low) half: ⌈w/2⌉. */
  private readonly rightBits: number;
  private readonly rightSize: number;
  private readonly leftMask: number;
  private readonly rightMask: number;
  /** The domain's bound split like a value, for the number walk's test. */
  private readonly boundLeft: number;
  private readonly boundRight: number;

  /**
   * @param domain the permutation is of `[0, domain)`; at most 2^64
   * @param roundKeys FEISTEL_ROUNDS 32-bit keys
   */
  constructor(
    readonly domain: bigint,
    private readonly roundKeys: readonly number[],
  ) {
    if (domain < 2n || domain > 1n << 64n) throw new RangeError(`domain must be in [2, 2^64], got ${domain}`);
    if (roundKeys.length !== FEISTEL_ROUNDS) throw new RangeError(`${FEISTEL_ROUNDS} round keys needed, got ${roundKeys.length}`);
    const bits = Math.max(2, (domain - 1n).toString(2).length);
    this.leftBits = Math.floor(bits / 2);
    this.rightBits = bits - this.leftBits;
    this.rightSize = 2 ** this.rightBits;
    this.leftMask = maskOf(this.leftBits);
    this.rightMask = maskOf(this.rightBits);
    this.boundLeft = Number(domain >> BigInt(this.rightBits));
    this.boundRight = Number(domain & BigInt(this.rightMask));
  }

  /** The image of `x` in `[0, domain)`. */
  forward(x: bigint): bigint {
    this.check(x);
    const shift = BigInt(this.rightBits);
    const low = BigInt(this.rightMask);
    let v = x;
    do v = this.join(this.network(Number(v >> shift), Number(v & low), false), shift);
    while (v >= this.domain);
    return v;
  }

  /** The preimage: `inverse(forward(x)) === x`. */
  inverse(y: bigint): bigint {
    this.check(y);
    const shift = BigInt(this.rightBits);
    const low = BigInt(this.rightMask);
    let v = y;
    do v = this.join(this.network(Number(v >> shift), Number(v & low), true), shift);
    while (v >= this.domain);
    return v;
  }

  /**
   * For domains up to 2^53: the same permutation on numbers, without bigint. The value walks as
   * its two halves, so no intermediate value needs more than a half's precision.
   */
  forwardNumber(x: number): number {
    return this.walkNumber(x, false);
  }

  inverseNumber(y: number): number {
    return this.walkNumber(y, true);
  }

  private walkNumber(x: number, backwards: boolean): number {
    const size = this.rightSize;
    const bl = this.boundLeft;
    const br = this.boundRight;
    let l = Math.floor(x / size);
    let r = x - l * size;
    const keys = this.roundKeys;
    const lm = this.leftMask;
    const rm = this.rightMask;
    // The rounds inline (no arrays, no calls per round): this is the hot path of every obfuscated ID.
    do {
      if (!backwards) {
        for (let i = 0; i < FEISTEL_ROUNDS; i += 2) {
          // Even round: the left half (⌊w/2⌋ bits) takes the right's mix cut to its width;
          // odd round: the right half takes the new left's. Each half keeps its width.
          const a = (l ^ (mix(r, keys[i]!) & lm)) >>> 0;
          const b = (r ^ (mix(a, keys[i + 1]!) & rm)) >>> 0;
          l = a;
          r = b;
        }
      } else {
        for (let i = FEISTEL_ROUNDS - 2; i >= 0; i -= 2) {
          const b = (r ^ (mix(l, keys[i + 1]!) & rm)) >>> 0;
          const a = (l ^ (mix(b, keys[i]!) & lm)) >>> 0;
          l = a;
          r = b;
        }
      }
    } while (l > bl || (l === bl && r >= br));
    return l * size + r;
  }

  private check(x: bigint): void {
    if (x < 0n || x >= this.domain) throw new RangeError(`${x} is outside [0, ${this.domain})`);
  }

  private join([l, r]: [number, number], shift: bigint): bigint {
    return (BigInt(l) << shift) | BigInt(r);
  }

  /** One pass of the network over the halves (the same rounds as the number walk). */
  private network(left: number, right: number, backwards: boolean): [number, number] {
    const keys = this.roundKeys;
    let l = left;
    let r = right;
    if (!backwards) {
      for (let i = 0; i < FEISTEL_ROUNDS; i += 2) {
        l = (l ^ (mix(r, keys[i]!) & this.leftMask)) >>> 0;
        r = (r ^ (mix(l, keys[i + 1]!) & this.rightMask)) >>> 0;
      }
    } else {
      for (let i = FEISTEL_ROUNDS - 2; i >= 0; i -= 2) {
        r = (r ^ (mix(l, keys[i + 1]!) & this.rightMask)) >>> 0;
        l = (l ^ (mix(r, keys[i]!) & this.leftMask)) >>> 0;
      }
    }
    return [l, r];
  }
}

function maskOf(bits: number): number {
  return bits === 32 ? 0xffffffff : 2 ** bits - 1;
}

/** A keyed 32-bit mix (murmur3's finaliser around the key). */
function mix(x: number, key: number): number {
  let h = Math.imul(x ^ key, 0x9e3779b1);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h ^ key, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
