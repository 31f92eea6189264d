import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, IdmintError } from '../../src/core/errors.js';

// The error table of the HTTP contract (docs/http-api.md, linked from the README).
const page = readFileSync(new URL('../../docs/http-api.md', import.meta.url), 'utf8');

describe('error codes', () => {
  it.each(Object.entries(ERROR_CODES))('%s is documented in docs/http-api.md with its HTTP status', (code, { status }) => {
    expect(page).toMatch(new RegExp(`\\| \`${code}\` \\| ${status} \\|`));
  });

  it('serialises to the public error shape without internals', () => {
    const error = new IdmintError('POOL_EMPTY', 'empty', { cause: new Error('secret detail') });
    expect(JSON.parse(JSON.stringify(error))).toEqual({ error: { code: 'POOL_EMPTY', message: 'empty' } });
    expect(error.retriable).toBe(true);
    expect(error.status).toBe(503);
  });
});
