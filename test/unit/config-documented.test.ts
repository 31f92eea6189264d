import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { envSchema } from '../../src/app/config.js';

// Every variable the config reads is a row of the configuration table (docs/configuration.md, linked
// from the README): an operator who reads it sees every knob, and a new one cannot land undocumented.
const page = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');

describe('configuration', () => {
  it.each(Object.keys(envSchema.shape))('%s is documented in docs/configuration.md', (name) => {
    expect(page).toMatch(new RegExp(`^\\| [^|\\n]*\`${name}\`[^|\\n]*\\|`, 'm'));
  });
});
