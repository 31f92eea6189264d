import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createPgDatabase, migrate, PostgresBizStore, type Database } from '../../../src/store/index.js';
import { bizStoreContract, rates } from './biz-store.contract.js';

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
      expect(rows[0]!.n).toBe(5n);
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

  it('validates its options', () => {
    expect(() => createPgDatabase({ connectionString: '' })).toThrow(expect.objectContaining({ code: 'BAD_REQUEST', field: 'connectionString' }));
    expect(() => createPgDatabase({ connectionString: url, schema: 'x"; drop' })).toThrow(expect.objectContaining({ code: 'BAD_REQUEST', field: 'schema' }));
    expect(() => createPgDatabase({ connectionString: url, max: 0 })).toThrow(expect.objectContaining({ code: 'BAD_REQUEST', field: 'max' }));
  });
});
