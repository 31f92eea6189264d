import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// Proves the wiring: the global setup named a Postgres that runs SQL, in a schema of our own.
describe('smoke: postgres', () => {
  const schema = `smoke_${randomBytes(6).toString('hex')}`;
  const client = new pg.Client({ connectionString: process.env.DATABASE_URL });

  beforeAll(async () => {
    await client.connect();
    await client.query(`CREATE SCHEMA ${schema}`);
  });
  afterAll(async () => {
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await client.end();
  });

  it('answers a query', async () => {
    const res = await client.query<{ one: number; version: string }>('SELECT 1 AS one, version() AS version');
    expect(res.rows[0]!.one).toBe(1);
    expect(res.rows[0]!.version).toMatch(/^PostgreSQL \d+/);
  });

  it('takes a segment with one atomic UPDATE ... RETURNING', async () => {
    await client.query(`CREATE TABLE ${schema}.seg (tag text PRIMARY KEY, max_id bigint NOT NULL, step int NOT NULL)`);
    await client.query(`INSERT INTO ${schema}.seg VALUES ('order', 0, 1000)`);
    const take = () => client.query<{ max_id: string }>(`UPDATE ${schema}.seg SET max_id = max_id + step WHERE tag = 'order' RETURNING max_id`);
    expect((await take()).rows[0]!.max_id).toBe('1000');
    expect((await take()).rows[0]!.max_id).toBe('2000');
  });
});
