import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FEISTEL_ROUNDS, FeistelPermutation } from '../../../src/core/format/feistel.js';

const keys = (seed: number): number[] => Array.from({ length: FEISTEL_ROUNDS }, (_, i) => (Math.imul(seed + i, 0x9e3779b1) ^ (seed << 7)) >>> 0);

describe('FeistelPermutation', () => {
  it('is a bijection on every 16-bit input, exhaustively, and decodes back', () => {
    const p = new FeistelPermutation(1n << 16n, keys(1));
    // Plain checks collected, one expect at the end: 196,608 expect calls made this test take
    // seconds, and over the 5 s timeout on a busy CI machine.
    const seen = new Uint8Array(1 << 16);
    const bad: string[] = [];
    for (let x = 0; x < 1 << 16; x++) {
      const y = p.forwardNumber(x);
      if (!(y >= 0 && y < 1 << 16)) bad.push(`${x} -> ${y} out of range`);
      else if (seen[y] !== 0) bad.push(`${x} -> ${y} seen before`);
      seen[y] = 1;
      if (p.inverseNumber(y) !== x) bad.push(`${y} decodes to ${p.inverseNumber(y)}, not ${x}`);
    }
    expect(bad.slice(0, 10)).toEqual([]);
  });

  it('is a bijection on an odd-sized domain (cycle-walking), exhaustively', () => {
    const n = 50_021;
    const p = new FeistelPermutation(BigInt(n), keys(2));
    const seen = new Set<number>();
    const bad: string[] = [];
    for (let x = 0; x < n; x++) {
      const y = p.forwardNumber(x);
      if (y >= n) bad.push(`${x} -> ${y} out of range`);
      seen.add(y);
      if (p.inverseNumber(y) !== x) bad.push(`${y} decodes to ${p.inverseNumber(y)}, not ${x}`);
    }
    expect(bad.slice(0, 10)).toEqual([]);
    expect(seen.size).toBe(n);
  });

  it.each([15, 17])('is a bijection on every %i-bit input (unbalanced halves, no walk), exhaustively', (bits) => {
    const n = 1 << bits;
    const p = new FeistelPermutation(BigInt(n), keys(bits));
    const seen = new Uint8Array(n);
    const wrong: number[] = [];
    for (let x = 0; x < n; x++) {
      const y = p.forwardNumber(x);
      if (!(y >= 0 && y < n) || seen[y] === 1 || p.inverseNumber(y) !== x) wrong.push(x);
      else seen[y] = 1;
      if (x % 997 === 0 && p.forward(BigInt(x)) !== BigInt(y)) wrong.push(x);
    }
    expect(wrong).toEqual([]);
    expect(seen.reduce((a, b) => a + b, 0)).toBe(n);
  });

  it.each([32, 53, 63])('round-trips and stays inside %i bits (fast-check)', (bits) => {
    const domain = 1n << BigInt(bits);
    const p = new FeistelPermutation(domain, keys(bits));
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: domain - 1n }), (x) => {
        const y = p.forward(x);
        expect(y >= 0n && y < domain).toBe(true);
        expect(p.inverse(y)).toBe(x);
        if (bits <= 53) expect(p.forwardNumber(Number(x))).toBe(Number(y));
      }),
      { numRuns: 2000 },
    );
  });

  it('keeps a segment ID below 2^53 - 1 (the domain of a 53-bit tag) and matches bigint and number walks', () => {
    const domain = (1n << 53n) - 1n;
    const p = new FeistelPermutation(domain, keys(9));
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: domain - 1n }), (x) => {
        const y = p.forwardNumber(Number(x));
        expect(y).toBeLessThan(Number(domain));
        expect(BigInt(y)).toBe(p.forward(x));
        expect(p.inverseNumber(y)).toBe(Number(x));
      }),
      { numRuns: 2000 },
    );
  });

  it('different keys give different orders', () => {
    const a = new FeistelPermutation(1n << 53n, keys(3));
    const b = new FeistelPermutation(1n << 53n, keys(4));
    const same = Array.from({ length: 1000 }, (_, i) => a.forwardNumber(i + 1) === b.forwardNumber(i + 1)).filter(Boolean).length;
    expect(same).toBeLessThan(5);
  });

  it('refuses values outside its domain', () => {
    const p = new FeistelPermutation(100n, keys(5));
    expect(() => p.forward(100n)).toThrow(/outside/);
  });
});
