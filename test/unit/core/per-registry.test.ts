import { describe, expect, it } from 'vitest';
import { perRegistry } from '../../../src/core/per-registry.js';

describe('perRegistry', () => {
  it('makes a set once per registry and hands the same set to every caller of that registry', () => {
    let made = 0;
    const metricsOf = perRegistry((registry: object) => ({ registry, n: ++made }));
    const a = {};
    const b = {};
    expect(metricsOf(a)).toBe(metricsOf(a));
    expect(metricsOf(b)).not.toBe(metricsOf(a));
    expect(made).toBe(2);
  });
});
