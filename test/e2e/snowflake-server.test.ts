import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';

/** Issued IDs as the server's own counter reports them. */
async function issued(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(/^idmint_snowflake_ids_total (\d+)/m.exec(text)?.[1] ?? 'NaN');
}

// Regression: the standalone Snowflake server once skipped the gate pass and left HEAD on, so a
// HEAD probe burned an ID; it now shares the API server's Leaf Snowflake routes.
describe('workers/snowflake.ts', () => {
  let server: SpawnedServer;
  let dataDir: string;
  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-snowflake-'));
    server = await spawnServer({ IDMINT_WORKER_ID: '7', IDMINT_DATA_DIR: dataDir, IDMINT_GATE_PASS: 'open-sesame' }, { worker: 'snowflake.ts' });
  });
  afterAll(async () => {
    expect(await server.stop()).toBe(0);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('requires the gate pass, as the API server does', async () => {
    const missing = await fetch(`${server.url}/api/snowflake/get/x`);
    expect(missing.status).toBe(401);
    expect(await missing.json()).toMatchObject({ error: { code: 'UNAUTHORIZED' } });
    const wrong = await fetch(`${server.url}/api/snowflake/get/x?gatePass=nope`);
    expect(wrong.status).toBe(401);
    const ok = await fetch(`${server.url}/api/snowflake/get/x?gatePass=open-sesame`);
    expect(ok.status).toBe(200);
    expect(BigInt(await ok.text()) >= 1n << 53n).toBe(true);
  });

  it('answers no HEAD on the issuing route, so a probe burns no ID', async () => {
    const before = await issued(server.url);
    const head = await fetch(`${server.url}/api/snowflake/get/x?gatePass=open-sesame`, { method: 'HEAD' });
    expect(head.status).toBe(405); // GET only: the answer says so (Allow), and burns nothing
    expect(await issued(server.url)).toBe(before);
  });

  it("decodes in Leaf's shape with the worker id it holds", async () => {
    const id = await (await fetch(`${server.url}/api/snowflake/get/x?gatePass=open-sesame`)).text();
    const decoded = (await (await fetch(`${server.url}/decodeSnowflakeId?snowflakeId=${id}`)).json()) as Record<string, string>;
    expect(decoded.workerId).toBe('7');
    expect(decoded.timestamp).toMatch(/^\d{13}\(\d{4}-/);
    const low = await fetch(`${server.url}/decodeSnowflakeId?snowflakeId=42`);
    expect(low.status).toBe(400);
  });
});
