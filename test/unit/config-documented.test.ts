import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { envSchema } from '../../src/app/config.js';

// Every variable the config reads is a row of the README's configuration table: an operator
// who reads the README sees every knob, and a new one cannot land undocumented.
const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

describe('configuration', () => {
  it.each(Object.keys(envSchema.shape))('%s is documented in README.md', (name) => {
    expect(readme).toMatch(new RegExp(`^\\| [^|\\n]*\`${name}\`[^|\\n]*\\|`, 'm'));
  });
});
