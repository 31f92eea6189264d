import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate as yieldToIo } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdmintClient } from '../../src/client/index.js';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';
import { expectNoDuplicates } from '../support/unique.js';
import { until } from '../support/poll.js';

// The SDK with two servers on one Postgres: one is SIGKILLed mid-run; callers get every ID they
// ask for, with zero duplicates and no error, because fetches fail over to the other server.
const run = Math.random().toString(36).slice(2, 10);
const schema = `sdkfail_${run}`;

describe('SDK failover across two servers', () => {
  let db: pg.Client;
  const dirs: string[] = [];
  const servers: SpawnedServer[] = [];

  beforeAll(async () => {
    const url = process.env.DATABASE_URL;
    if (!url) throw new Error('DATABASE_URL is not set: the e2e global setup starts the local servers');
    db = new pg.Client({ connectionString: url });
    await db.connect();
    await db.query(`CREATE SCHEMA ${schema}`);
    for (let i = 0; i < 2; i++) {
      const dir = mkdtempSync(join(tmpdir(), 'idmint-sdkfail-'));
      dirs.push(dir);
      servers.push(await spawnServer({ DATABASE_URL: url, IDMINT_PG_SCHEMA: schema, IDMINT_DATA_DIR: dir }));
    }
    const created = await fetch(`${servers[0]!.url}/v1/biz`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"bizTag":"order","step":2000,"fallback":"error"}',
    });
    expect(created.status).toBe(201);
  });

  afterAll(async () => {
    for (const s of servers) await s.stop('SIGKILL');
    await db?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await db?.end();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('32 callers (tryNextNumber, tryNextNumbers, nextMany) keep getting IDs while one of two servers is SIGKILLed: every ID, zero duplicates, no error', async () => {
    const client = createIdmintClient({ urls: servers.map((s) => s.url), batchSize: 1000, maxBatchSize: 20_000 });
    const order = client.tag('order');
    const ids: number[] = [];
    const errors: string[] = [];
    let stop = false;
    const caller = async (n: number): Promise<void> => {
      const into = new Float64Array(1 + (n % 64));
      for (let i = 0; !stop; i++) {
        try {
          if ((n + i) % 3 === 0) ids.push(order.tryNextNumber() ?? (await order.nextNumber()));
          else if ((n + i) % 3 === 1) ids.push(...(await client.nextMany('order', 1 + (i % 50))).map(Number));
          else {
            // The bulk synchronous take: whatever is buffered, else one awaited ID.
            const k = order.tryNextNumbers(into);
            if (k === 0) ids.push(await order.nextNumber());
            else for (let j = 0; j < k; j++) ids.push(into[j]!);
          }
        } catch (err) {
          errors.push(String(err));
        }
        if (i % 100 === 0) await yieldToIo();
      }
    };
    const callers = Promise.all(Array.from({ length: 32 }, (_, n) => caller(n)));
    await until('50,000 IDs before the kill', () => ids.length >= 50_000, { intervalMs: 10 });
    await servers[0]!.stop('SIGKILL');
    const atKill = ids.length;
    await until('200,000 IDs after the kill', () => ids.length >= atKill + 200_000, { intervalMs: 10 });
    stop = true;
    await callers;
    await client.close();
    expect(errors).toEqual([]);
    expectNoDuplicates(ids);
    expect(ids.length).toBeGreaterThan(250_000);
  });
});
