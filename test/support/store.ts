import type { BizStore } from '../../src/core/ports.js';
import { Dispenser } from '../../src/dispenser/dispenser.js';
import { MemoryPool } from '../../src/dispenser/sources/memory.js';
import { segmentSource } from '../../src/dispenser/sources/segment.js';
import { PostgresBizStore } from '../../src/store/biz-store.js';
import type { Database } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrations.js';
import { createPgDatabase } from '../../src/store/pg.js';
import { env } from './env.js';
import { uid } from './names.js';

export interface TestStore {
  readonly db: Database;
  readonly store: PostgresBizStore;
  readonly schema: string;
  /** DATABASE_URL whose connections use this schema (for spawned processes). */
  readonly url: string;
  /** The ranges the ledger recorded for a tag, by start. */
  ledger(bizTag: string): Promise<Array<{ start: number; end: number }>>;
  /** Drops the schema and closes. */
  close(): Promise<void>;
}

/** The one test store: the real Postgres (DATABASE_URL) in a fresh, migrated schema of its own. */
export async function freshStore(prefix = 't'): Promise<TestStore> {
  const schema = `${prefix}_${uid()}`;
  const db = createPgDatabase({ connectionString: env('DATABASE_URL'), schema });
  await migrate(db);
  const store = new PostgresBizStore(db, { owner: 'test' });
  const url = new URL(env('DATABASE_URL'));
  url.searchParams.set('options', `-c search_path=${schema}`);
  return {
    db,
    store,
    schema,
    url: url.toString(),
    async ledger(bizTag) {
      const { rows } = await db.query<{ start_id: bigint; end_id: bigint }>('SELECT start_id, end_id FROM idmint_ledger WHERE biz_tag = $1 ORDER BY start_id', [
        bizTag,
      ]);
      return rows.map((r) => ({ start: Number(r.start_id), end: Number(r.end_id) }));
    },
    async close() {
      await store.close();
      await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
      await db.close();
    },
  };
}

/** A test store with the real dispenser over in-memory double buffers and direct segments. */
export type DispensingStore = TestStore & { readonly dispenser: Dispenser };

export async function storeWithDispenser(prefix = 't'): Promise<DispensingStore> {
  const base = await freshStore(prefix);
  const memory = new MemoryPool({ allocator: base.store });
  const dispenser = new Dispenser({ store: base.store as BizStore, pools: { memory }, segment: segmentSource(base.store) });
  return {
    ...base,
    dispenser,
    async close() {
      await memory.close();
      await base.close();
    },
  };
}
