import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { leafKeyToBizTag } from '../../src/core/leaf-key.js';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';
import { idmint } from '../support/cli.js';

// The MariaDB this machine runs (docs/cli.md, "Migrating from Leaf"); a throwaway database per run.
const MYSQL = process.env.IDMINT_TEST_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306';
const TOKEN = 'leaf-import-token';
const LONG_KEY = `Leaf.${'K'.repeat(123)}`;
// Leaf's own DDL for leaf_alloc.
const LEAF_DDL = `CREATE TABLE leaf_alloc (
  biz_tag varchar(128) NOT NULL DEFAULT '',
  max_id bigint(20) NOT NULL DEFAULT '1',
  step int(11) NOT NULL,
  description varchar(256) DEFAULT NULL,
  update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
) ENGINE=InnoDB`;
const LEAF_ROWS: Array<[string, number, number, string | null]> = [
  ['order', 12_000, 1000, 'orders'],
  ['Bad_Key', 3000, 500, null],
  [LONG_KEY, 777, 100, 'a long key'],
  ['ticket', 400, 100, 'already in idmint'],
  ['trace', 10, 10, 'a snowflake tag in idmint'],
];

describe('idmint import leaf (MariaDB)', () => {
  const database = `idmint_leaf_${Math.random().toString(36).slice(2, 10)}`;
  let admin: mysql.Connection;
  let server: SpawnedServer;
  let dataDir: string;
  let env: Record<string, string>;
  const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

  beforeAll(async () => {
    admin = await mysql.createConnection({ uri: MYSQL });
    await admin.query(`CREATE DATABASE ${database}`);
    await admin.query(`USE ${database}`);
    await admin.query(LEAF_DDL);
    for (const row of LEAF_ROWS) await admin.query('INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, ?, ?, ?)', row);
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-leaf-'));
    server = await spawnServer({ IDMINT_DATA_DIR: dataDir, IDMINT_ADMIN_TOKEN: TOKEN });
    env = { IDMINT_URL: server.url, IDMINT_ADMIN_TOKEN: TOKEN };
    // idmint already serves two of the names: a segment tag that handed out IDs, and a Snowflake tag.
    await fetch(`${server.url}/v1/biz`, { method: 'POST', headers, body: JSON.stringify({ bizTag: 'ticket', step: 10 }) });
    await fetch(`${server.url}/v1/biz`, { method: 'POST', headers, body: JSON.stringify({ bizTag: 'trace', mode: 'snowflake' }) });
  });

  afterAll(async () => {
    await server?.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
    await admin?.query(`DROP DATABASE IF EXISTS ${database}`);
    await admin?.end();
  });

  const tagNames = async (): Promise<string[]> =>
    ((await (await fetch(`${server.url}/v1/biz`, { headers })).json()) as { tags: Array<{ bizTag: string }> }).tags.map((t) => t.bizTag);
  const ids = async (bizTag: string, count: number): Promise<number[]> =>
    ((await (await fetch(`${server.url}/v1/ids/${bizTag}?count=${count}`)).json()) as { ids: string[] }).ids.map(Number);

  it('plans first: a dry run prints a line per tag and changes nothing', async () => {
    const before = await tagNames();
    const run = await idmint(['import', 'leaf', '--mysql', `${MYSQL}/${database}`], env);
    expect(run.out).toContain('[1/5]');
    expect(run.out).toMatch(/order: would create, next ID > 12000/);
    expect(run.out).toMatch(/Bad_Key -> bad_key-[0-9a-f]{8}: would create, next ID > 3000/);
    expect(run.out).toMatch(/ticket: would advance \(unless already above\), next ID > 400/);
    expect(run.out).toMatch(/trace: skipped: idmint's tag "trace" is a snowflake tag/);
    expect(run.out).toContain('dry run: nothing changed');
    expect(run.out).toMatch(/1 would be skipped/);
    // A dry run imports nothing, so it does not fail.
    expect(run.code).toBe(0);
    expect(await tagNames()).toEqual(before);
  });

  it('imports with --apply, idempotently, and every later ID is above the ranges Leaf allocated', async () => {
    const early = await ids('ticket', 5);
    const first = await idmint(['import', 'leaf', '--mysql', `${MYSQL}/${database}`, '--apply'], env);
    expect(first.out).toMatch(/4 imported, 1 skipped or failed/);
    expect(first.out).toMatch(/order: created, next ID > 12000/);
    expect(first.out).toMatch(/ticket: advanced, next ID > 400/);
    // Run again: nothing changes — no tag's buffered IDs dropped, no segment taken for it.
    const before = await ids('order', 3);
    const again = await idmint(['import', 'leaf', '--mysql', `${MYSQL}/${database}`, '--apply'], env);
    expect(again.out).toMatch(/4 imported, 1 skipped or failed/);
    expect(again.out).toMatch(/order: unchanged: its IDs are already above 12000/);
    expect(again.out).toMatch(/ticket: unchanged: its IDs are already above 400/);
    expect(await ids('order', 3)).toEqual([before[2]! + 1, before[2]! + 2, before[2]! + 3]);
    const leafMax = new Map(LEAF_ROWS.map(([key, maxId]) => [key, maxId]));
    for (const key of ['order', 'Bad_Key', LONG_KEY, 'ticket']) {
      const got = await ids(leafKeyToBizTag(key), 1500);
      expect(Math.min(...got)).toBeGreaterThan(leafMax.get(key)!);
    }
    // Leaf's routes take Leaf's keys as they are.
    for (const key of ['Bad_Key', LONG_KEY]) {
      const response = await fetch(`${server.url}/api/segment/get/${encodeURIComponent(key)}`);
      expect(response.status).toBe(200);
      expect(Number(await response.text())).toBeGreaterThan(leafMax.get(key)!);
    }
    // The IDs idmint issued before the import are not repeated after it.
    const later = await ids('ticket', 500);
    expect(later.filter((id) => early.includes(id))).toEqual([]);
  });

  it("says what to fix when Leaf's database cannot be reached", async () => {
    const run = await idmint(['import', 'leaf', '--mysql', 'mysql://root:secret@127.0.0.1:1/leaf'], env);
    expect(run.code).toBe(1);
    expect(run.out).toMatch(/^idmint: NOT_READY: cannot reach Leaf's database at mysql:\/\/root:\*\*\*@127\.0\.0\.1:1\/leaf/m);
    expect(run.out).not.toContain('secret');
  });
});
