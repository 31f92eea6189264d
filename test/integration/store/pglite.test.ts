import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createPgliteDatabase, migrate, PostgresBizStore } from '../../../src/store/index.js';
import { bizStoreContract, rates } from '../../contracts/biz-store.contract.js';

// PGlite is one connection: every handle onto a fresh database is the same instance.
bizStoreContract('pglite', {
  async fresh(handles) {
    const db = await createPgliteDatabase();
    return { handles: Array.from({ length: handles }, () => db), dispose: () => db.close() };
  },
});

describe('createPgliteDatabase', () => {
  afterAll(() => {
    if (rates.pglite !== undefined) console.info(`pglite: ${rates.pglite} segments/s with 8 concurrent allocators`);
  });

  it('keeps tags and counters in its data directory across close and reopen', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'idmint-pglite-'));
    try {
      const first = await createPgliteDatabase({ dataDir: dir });
      await migrate(first);
      await new PostgresBizStore(first).createBiz({ bizTag: 'order', step: 10 });
      expect(await new PostgresBizStore(first).allocate('order', 10)).toMatchObject({ start: 1, end: 10 });
      await first.close();

      const second = await createPgliteDatabase({ dataDir: dir });
      try {
        expect(await migrate(second)).toEqual([]);
        const store = new PostgresBizStore(second);
        expect(await store.getBiz('order')).toMatchObject({ bizTag: 'order', step: 10 });
        expect(await store.allocate('order', 10)).toMatchObject({ start: 11, end: 20 });
      } finally {
        await second.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
