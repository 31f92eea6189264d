import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';
import { expectNoDuplicates } from '../support/unique.js';
import { until } from '../support/poll.js';

const TOKEN = 'multi-admin-token';
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const baseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

describe('several API processes on one Postgres', () => {
  const schema = `idmint_multi_${randomBytes(4).toString('hex')}`;
  const dirs: string[] = [];
  const servers: SpawnedServer[] = [];
  let client: pg.Client;

  beforeAll(async () => {
    client = new pg.Client({ connectionString: baseUrl });
    await client.connect();
    await client.query(`CREATE SCHEMA ${schema}`);
    const url = new URL(baseUrl);
    url.searchParams.set('options', `-c search_path=${schema}`);
    // Three processes start at once: migrations must cope (advisory lock).
    const started = await Promise.all(
      [0, 1, 2].map(() => {
        const dataDir = mkdtempSync(join(tmpdir(), 'idmint-multi-'));
        dirs.push(dataDir);
        return spawnServer({ DATABASE_URL: url.toString(), IDMINT_DATA_DIR: dataDir, IDMINT_ADMIN_TOKEN: TOKEN });
      }),
    );
    servers.push(...started);
  });

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop('SIGKILL')));
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    await client?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await client?.end();
  });

  it('serves a tag created on one process from every process once their cached settings expire', async () => {
    const [a, b, c] = servers as [SpawnedServer, SpawnedServer, SpawnedServer];
    // b looks the tag up before it exists, so its cache holds "unknown" when a creates it.
    expect((await fetch(`${b.url}/v1/ids/coupon`)).status).toBe(404);
    expect((await fetch(`${a.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify({ bizTag: 'coupon', step: 100 }) })).status).toBe(201);
    await until('b to serve the new tag', async () => (await fetch(`${b.url}/v1/ids/coupon`)).status === 200, { timeoutMs: 10_000 });
    expect((await fetch(`${c.url}/v1/ids/coupon`)).status).toBe(200);
  });

  it('hands out 150,000 IDs from three processes with zero duplicates, all inside ledger segments', async () => {
    const ids: string[] = [];
    let remaining = 150_000;
    await Promise.all(
      Array.from({ length: 24 }, async (_, i) => {
        const server = servers[i % servers.length]!;
        while (remaining > 0) {
          const count = Math.min(remaining, 1 + Math.floor(Math.random() * 300));
          remaining -= count;
          const body = (await (await fetch(`${server.url}/v1/ids/coupon?count=${count}`)).json()) as { ids: string[]; source: string };
          ids.push(...body.ids);
        }
      }),
    );
    expectNoDuplicates(ids);
    const { rows } = await client.query<{ start_id: string; end_id: string }>(
      `SELECT start_id::text, end_id::text FROM ${schema}.idmint_ledger WHERE biz_tag = 'coupon' `,
    );
    const ranges = rows.map((r) => [Number(r.start_id), Number(r.end_id)] as const).sort((x, y) => x[0] - y[0]);
    const inLedger = (id: number): boolean => {
      let lo = 0;
      let hi = ranges.length - 1;
      while (lo <= hi) {
        const mid = (lo + hi) >> 1;
        const [start, end] = ranges[mid]!;
        if (id < start) hi = mid - 1;
        else if (id > end) lo = mid + 1;
        else return true;
      }
      return false;
    };
    const outside = ids.filter((id) => !inLedger(Number(id)));
    expect(outside.length, `ledger ranges: ${JSON.stringify(ranges.slice(0, 5))} of ${ranges.length}; outside e.g. ${outside.slice(0, 3).join(',')}`).toBe(0);
  });

  it('gives each process its own Snowflake worker id, so Snowflake IDs never collide across them', async () => {
    const [a] = servers as [SpawnedServer];
    expect((await fetch(`${a.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify({ bizTag: 'trace', mode: 'snowflake' }) })).status).toBe(201);
    const ids: string[] = [];
    const workers = new Set<string>();
    await Promise.all(
      servers.flatMap((server) =>
        Array.from({ length: 4 }, async () => {
          for (let i = 0; i < 50; i++) {
            const body = (await (await fetch(`${server.url}/v1/ids/trace?count=500`)).json()) as { ids: string[] };
            ids.push(...body.ids);
          }
          const ready = (await (await fetch(`${server.url}/readyz`)).json()) as { checks: { snowflake: { message: string } } };
          workers.add(ready.checks.snowflake.message);
        }),
      ),
    );
    expectNoDuplicates(ids);
    // Three processes, three worker ids, all assigned by the shared Postgres (no ZooKeeper here).
    expect(workers.size).toBe(3);
    for (const worker of workers) expect(worker).toMatch(/from postgres/);
  });

  it('stops serving a deleted tag on every process once their cached settings expire', async () => {
    const [a, b] = servers as [SpawnedServer, SpawnedServer];
    expect((await fetch(`${a.url}/v1/biz/coupon`, { method: 'DELETE', headers: admin })).status).toBe(204);
    await until('b to refuse the deleted tag', async () => (await fetch(`${b.url}/v1/ids/coupon`)).status === 404, { timeoutMs: 10_000 });
  });
});
