import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import type { Segment } from '../../../src/core/ports.js';
import { createPgDatabase, migrate, PostgresBizStore, type Database } from '../../../src/store/index.js';
import { bizStoreContract, rates } from '../../contracts/biz-store.contract.js';

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const newSchema = (): string => `idmint_t_${randomUUID().replaceAll('-', '').slice(0, 12)}`;

async function dropSchema(schema: string): Promise<void> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await admin.end();
  }
}

bizStoreContract('postgres', {
  async fresh(handles) {
    const schema = newSchema();
    const dbs: Database[] = Array.from({ length: handles }, () => createPgDatabase({ connectionString: url, schema }));
    return {
      handles: dbs,
      async dispose() {
        await Promise.all(dbs.map((d) => d.close()));
        await dropSchema(schema);
      },
    };
  },
});

describe('createPgDatabase', () => {
  const schemas: string[] = [];
  afterAll(async () => {
    for (const s of schemas) await dropSchema(s);
    if (rates.postgres !== undefined) console.info(`postgres: ${rates.postgres} segments/s with 8 concurrent allocators`);
  });

  it('creates its schema and keeps every table in it, isolated from other schemas', async () => {
    const [a, b] = [newSchema(), newSchema()];
    schemas.push(a, b);
    const dbA = createPgDatabase({ connectionString: url, schema: a });
    const dbB = createPgDatabase({ connectionString: url, schema: b });
    try {
      await migrate(dbA);
      await migrate(dbB);
      await new PostgresBizStore(dbA).createBiz({ bizTag: 'same-name' });
      await new PostgresBizStore(dbB).createBiz({ bizTag: 'same-name' });
      expect(await new PostgresBizStore(dbA).allocate('same-name', 10)).toMatchObject({ start: 1, end: 10 });
      expect(await new PostgresBizStore(dbB).allocate('same-name', 10)).toMatchObject({ start: 1, end: 10 });
      const { rows } = await dbA.query<{ n: bigint }>(
        `SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = $1 AND table_name LIKE 'idmint%'`,
        [a],
      );
      expect(rows[0]!.n).toBe(10n); // nine tables of the migrations and idmint_migrations itself
    } finally {
      await dbA.close();
      await dbB.close();
    }
  });

  it('passes SQL errors through with their SQLSTATE', async () => {
    const db = createPgDatabase({ connectionString: url });
    try {
      await expect(db.query('SELECT no_such_column FROM pg_class')).rejects.toMatchObject({ code: '42703' });
    } finally {
      await db.close();
    }
  });

  it('reports an unreachable server as NOT_READY', async () => {
    const db = createPgDatabase({ connectionString: 'postgres://postgres@127.0.0.1:1/postgres', schema: newSchema() });
    try {
      await expect(db.query('SELECT 1')).rejects.toMatchObject({ code: 'NOT_READY', retriable: true });
      await expect(db.transaction(async () => 1)).rejects.toMatchObject({ code: 'NOT_READY' });
    } finally {
      await db.close();
    }
  });

  it('never repeats a range while connections are killed mid-allocation; the ledger has every committed range', async () => {
    const schema = newSchema();
    schemas.push(schema);
    const app = `idmint_fault_${randomUUID().slice(0, 8)}`;
    const db = createPgDatabase({ connectionString: `${url}${url.includes('?') ? '&' : '?'}application_name=${app}`, schema, max: 8 });
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      await migrate(db);
      const store = new PostgresBizStore(db);
      await store.createBiz({ bizTag: 'fault' });
      let stop = false;
      let kills = 0;
      const killer = (async () => {
        while (!stop) {
          const r = await admin.query<{ ok: boolean }>('SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = $1', [app]);
          kills += r.rows.filter((x) => x.ok).length;
          await sleep(10); // the pace of the fault: a backend killed every 10 ms
        }
      })();
      const got: Segment[] = [];
      const failures: unknown[] = [];
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          for (let i = 0; i < 150; i++) {
            try {
              got.push(await store.allocate('fault', 7));
            } catch (err) {
              failures.push(err);
            }
          }
        }),
      );
      stop = true;
      await killer;
      expect(kills).toBeGreaterThan(0);
      console.info(`fault: ${kills} connections killed, ${failures.length} allocations failed, ${got.length} succeeded`);
      for (const err of failures) expect(err).toMatchObject({ code: 'NOT_READY', retriable: true });

      const sorted = [...got].sort((a, b) => a.start - b.start);
      for (let i = 1; i < sorted.length; i++) expect(sorted[i]!.start).toBeGreaterThan(sorted[i - 1]!.end);
      // Counter and ledger move in one statement: the ledger tiles [1, max_id] exactly, gaps or not in what callers saw.
      const ledger = await db.query<{ start_id: bigint; end_id: bigint }>(
        "SELECT start_id, end_id FROM idmint_ledger WHERE biz_tag = 'fault' ORDER BY start_id",
      );
      let next = 1n;
      for (const row of ledger.rows) {
        expect(row.start_id).toBe(next);
        next = row.end_id + 1n;
      }
      const counter = await db.query<{ max_id: bigint }>("SELECT max_id FROM idmint_segment WHERE biz_tag = 'fault'");
      expect(counter.rows[0]!.max_id).toBe(next - 1n);
      const inLedger = new Set(ledger.rows.map((r) => `${r.start_id}-${r.end_id}`));
      for (const s of got) expect(inLedger.has(`${s.start}-${s.end}`)).toBe(true);
    } finally {
      await admin.end();
      await db.close();
    }
  });

  it('validates its options', () => {
    expect(() => createPgDatabase({ connectionString: '' })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID', field: 'connectionString' }));
    expect(() => createPgDatabase({ connectionString: url, schema: 'x"; drop' })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID', field: 'schema' }));
    expect(() => createPgDatabase({ connectionString: url, max: 0 })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID', field: 'max' }));
    expect(() => createPgDatabase({ connectionString: url, connectionTimeoutMillis: -1 })).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID', field: 'connectionTimeoutMillis' }),
    );
  });
});
