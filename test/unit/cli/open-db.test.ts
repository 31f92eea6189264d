import { afterEach, expect, it } from 'vitest';
import { openDatabase } from '../../../src/cli/open-db.js';

const saved = process.env.IDMINT_PG_SCHEMA;
afterEach(() => {
  if (saved === undefined) delete process.env.IDMINT_PG_SCHEMA;
  else process.env.IDMINT_PG_SCHEMA = saved;
});

// Issue 46: an IDMINT_PG_SCHEMA the servers would refuse is refused by the CLI too, naming it, before any connection.
it('refuses an IDMINT_PG_SCHEMA the servers would refuse, naming it, before connecting', async () => {
  process.env.IDMINT_PG_SCHEMA = 'Bad-Schema';
  await expect(openDatabase({ url: 'postgres://127.0.0.1:1/none' }, 'the record')).rejects.toMatchObject({
    code: 'CONFIG_INVALID',
    message: expect.stringContaining('IDMINT_PG_SCHEMA'),
  });
});
