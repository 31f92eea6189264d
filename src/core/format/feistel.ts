/**
 * A keyed permutation of the integers `[0, n)`: a balanced Feistel network over the smallest even
 * bit width that holds `n - 1`, with cycle-walking (a value that lands outside `[0, n)` is
 * permuted again until it lands inside). Being a permutation, it maps distinct IDs to distinct
 * IDs — uniqueness is kept by construction — and stays inside the domain: a 32-bit ID stays a
 * 32-bit ID, a segment ID stays below 2^53. Reversible with the same key. Pure: the round keys
 * come from the caller (derived from IDMINT_OBFUSCATION_KEY outside the core).
 *
 * Halves are at most 32 bits, so rounds run on plain numbers (Math.imul), not bigint.
 */
// Luby–Rackoff: four rounds already make a strong pseudorandom permutation from a pseudorandom
// round function; six leave a margin for a round function that is a fast mix, not a cipher.
export const FEISTEL_ROUNDS = 6;

export class FeistelPermutation {
  /** Bits of each half. */
  private readonly half: number;
  private readonly halfSize: number;
  private readonly mask: number;

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
    const bits = (domain - 1n).toString(2).length;
    this.half = Math.max(1, Math.ceil(bits / 2));
    this.halfSize = 2 ** this.half;
    this.mask = this.half === 32 ? 0xffffffff : this.halfSize - 1;
  }

  /** The image of `x` in `[0, domain)`. */
  forward(x: bigint): bigint {
    this.check(x);
    let v = x;
    do v = this.round(v, false);
    while (v >= this.domain);
    return v;
  }

  /** The preimage: `inverse(forward(x)) === x`. */
  inverse(y: bigint): bigint {
    this.check(y);
    let v = y;
    do v = this.round(v, true);
    while (v >= this.domain);
    return v;
  }

  /**
   * For domains up to 2^53: the same permutation on numbers, without bigint. The value walks as
   * its two halves, since a walk may pass through values up to 2^54, beyond a double's precision.
   */
  forwardNumber(x: number): number {
    return this.walkNumber(x, false);
  }

  inverseNumber(y: number): number {
    return this.walkNumber(y, true);
  }

  private walkNumber(x: number, backwards: boolean): number {
    const size = this.halfSize;
    const domain = Number(this.domain);
    const dl = Math.floor(domain / size);
    const dr = domain % size;
    const keys = this.roundKeys;
    const mask = this.mask;
    let l = Math.floor(x / size);
    let r = x % size;
    // The rounds inline (no arrays per round): this is the hot path of every obfuscated ID.
    do {
      if (!backwards) {
        for (let i = 0; i < FEISTEL_ROUNDS; i++) {
          const next = ((l ^ mix(r, keys[i]!)) & mask) >>> 0;
          l = r;
          r = next;
        }
      } else {
        for (let i = FEISTEL_ROUNDS - 1; i >= 0; i--) {
          const prev = ((r ^ mix(l, keys[i]!)) & mask) >>> 0;
          r = l;
          l = prev;
        }
      }
    } while (l > dl || (l === dl && r >= dr));
    return l * size + r;
  }

  private check(x: bigint): void {
    if (x < 0n || x >= this.domain) throw new RangeError(`${x} is outside [0, ${this.domain})`);
  }

  private round(v: bigint, backwards: boolean): bigint {
    const h = BigInt(this.half);
    const [l, r] = this.feistel(Number(v >> h), Number(v & BigInt(this.mask)), backwards);
    return (BigInt(l) << h) | BigInt(r);
  }

  private feistel(left: number, right: number, backwards: boolean): [number, number] {
    let l = left;
    let r = right;
    if (!backwards) {
      for (let i = 0; i < FEISTEL_ROUNDS; i++) {
        const next = (l ^ this.f(r, this.roundKeys[i]!)) & this.mask;
        l = r;
        r = next >>> 0;
      }
    } else {
      for (let i = FEISTEL_ROUNDS - 1; i >= 0; i--) {
        const prev = (r ^ this.f(l, this.roundKeys[i]!)) & this.mask;
        r = l;
        l = prev >>> 0;
      }
    }
    return [l >>> 0, r >>> 0];
  }

  /** The round function, cut to the half's width. */
  private f(x: number, key: number): number {
    return mix(x, key) & this.mask;
  }
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
