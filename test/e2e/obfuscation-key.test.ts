import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';
import { until } from '../support/poll.js';

// Two processes sharing one Postgres with different IDMINT_OBFUSCATION_KEYs apply two different
// permutations to disjoint raw IDs, and the images overlap: before the fingerprint check, 200
// rounds of count=1000 from each repeated 7 IDs. The first key is recorded in Postgres; a process
// with another key refuses obfuscated tags (and says so in /readyz), a process with the same key
// serves them, and no obfuscated ID is ever handed out twice.
const TOKEN = 'obfuscation-key-admin-token';
const KEY_ONE = 'key-one-0123456789';
const KEY_TWO = 'key-two-9876543210';
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

describe('IDMINT_OBFUSCATION_KEY differs between processes of one deployment', () => {
  const schema = `idmint_okey_${randomBytes(4).toString('hex')}`;
  const dirs: string[] = [];
  const servers: SpawnedServer[] = [];
  let first: SpawnedServer;
  let mismatched: SpawnedServer;
  let sameKey: SpawnedServer;

  const start = async (key: string): Promise<SpawnedServer> => {
    const dir = mkdtempSync(join(tmpdir(), 'idmint-okey-'));
    dirs.push(dir);
    const server = await spawnServer({
      DATABASE_URL: process.env.DATABASE_URL as string,
      IDMINT_PG_SCHEMA: schema,
      IDMINT_DATA_DIR: dir,
      IDMINT_ADMIN_TOKEN: TOKEN,
      IDMINT_OBFUSCATION_KEY: key,
    });
    servers.push(server);
    return server;
  };

  beforeAll(async () => {
    first = await start(KEY_ONE);
    for (const body of [
      { bizTag: 'secret', format: 'obfuscated', maxLimit: 4294967295, step: 1000 },
      { bizTag: 'plain', step: 1000 },
    ]) {
      const response = await fetch(`${first.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify(body) });
      expect(response.status, await response.clone().text()).toBe(201);
    }
    mismatched = await start(KEY_TWO);
    sameKey = await start(KEY_ONE);
  });

  afterAll(async () => {
    for (const server of servers) await server.stop('SIGKILL');
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    const db = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await db.connect();
    await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await db.end();
  });

  it('the process with another key refuses obfuscated tags with NOT_READY naming the variable, and still serves decimal ones', async () => {
    for (let round = 0; round < 20; round++) {
      const response = await fetch(`${mismatched.url}/v1/ids/secret?count=1000`);
      expect(response.status).toBe(503);
      const { error } = (await response.json()) as { error: { code: string; message: string } };
      expect(error.code).toBe('NOT_READY');
      expect(error.message).toContain('IDMINT_OBFUSCATION_KEY');
    }
    const plain = await fetch(`${mismatched.url}/v1/ids/plain?count=10`);
    expect(plain.status).toBe(200);
    // Nor may it create an obfuscated tag, or decode one with the wrong permutation.
    const create = await fetch(`${mismatched.url}/v1/biz`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ bizTag: 'secret2', format: 'obfuscated' }),
    });
    expect(create.status).toBe(400);
    expect(((await create.json()) as { error: { message: string } }).error.message).toContain('IDMINT_OBFUSCATION_KEY');
  });

  it('says so in /readyz (degraded, still 200: decimal tags are served) and in one log line', async () => {
    const response = await fetch(`${mismatched.url}/readyz`);
    expect(response.status).toBe(200);
    const report = (await response.json()) as { status: string; checks: Record<string, { ok: boolean; message?: string }> };
    expect(report.status).toBe('degraded');
    expect(report.checks.deployment).toMatchObject({ ok: false });
    expect(report.checks.deployment?.message).toContain('obfuscation-key-fingerprint differs (check IDMINT_OBFUSCATION_KEY)');
    const lines = mismatched
      .output()
      .split('\n')
      .filter((l) => l.includes('the obfuscation key differs') && l.includes('"level":50'));
    expect(lines).toHaveLength(1);
    // Probes repeat every few seconds: the failing check is logged once, not per probe.
    for (let i = 0; i < 3; i++) await fetch(`${mismatched.url}/readyz`);
    await until('the readiness line', () => mismatched.output().includes('readiness check failing'));
    expect(
      mismatched
        .output()
        .split('\n')
        .filter((l) => l.includes('readiness check failing')),
    ).toHaveLength(1);
    // The key itself is never written anywhere.
    for (const server of servers) expect(server.output()).not.toContain(KEY_TWO);
    expect(mismatched.output()).not.toContain(KEY_ONE);
    expect(((await (await fetch(`${first.url}/readyz`)).json()) as { checks: Record<string, unknown> }).checks.deployment).toBeUndefined();
  });

  it('two processes with the recorded key serve the obfuscated tag side by side: zero duplicates', async () => {
    const seen = new Set<string>();
    let duplicates = 0;
    await Promise.all(
      [first, sameKey].map(async (server) => {
        for (let round = 0; round < 100; round++) {
          const response = await fetch(`${server.url}/v1/ids/secret?count=1000`);
          expect(response.status).toBe(200);
          const { ids } = (await response.json()) as { ids: string[] };
          for (const id of ids) {
            if (seen.has(id)) duplicates++;
            seen.add(id);
          }
        }
      }),
    );
    expect(duplicates).toBe(0);
    expect(seen.size).toBe(200_000);
  });
});
