import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdmintClient } from '../../src/client/index.js';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';
import { expectNoDuplicates } from '../support/unique.js';

// ID formats on a real server: each format round-trips through /v1/ids and /v1/decode (which
// shows the raw ID), bad formatted input is a BAD_REQUEST naming the format, an obfuscated tag
// repeats nothing across a restart, and a format that needs a key is refused without one.
const TOKEN = 'formats-admin-token';
const KEY = 'formats-test-obfuscation-key-0001';
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const FORMATS = ['decimal', 'obfuscated', 'base62', 'sqids', 'obfuscated+base62', 'obfuscated+sqids'];

describe('ID formats (real embedded server)', () => {
  let dataDir: string;
  let server: SpawnedServer;
  const env = (): Record<string, string> => ({ IDMINT_DATA_DIR: dataDir, IDMINT_ADMIN_TOKEN: TOKEN, IDMINT_OBFUSCATION_KEY: KEY });

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-formats-'));
    server = await spawnServer(env());
    for (const [i, format] of FORMATS.entries()) {
      const response = await fetch(`${server.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify({ bizTag: `f${i}`, format }) });
      expect(response.status, await response.clone().text()).toBe(201);
    }
    expect(
      (
        await fetch(`${server.url}/v1/biz`, {
          method: 'POST',
          headers: admin,
          body: JSON.stringify({ bizTag: 'flake', mode: 'snowflake', format: 'obfuscated+base62' }),
        })
      ).status,
    ).toBe(201);
  });

  afterAll(async () => {
    await server?.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it.each(FORMATS.map((f, i) => [f, i] as const))('%s: IDs round-trip through decode, which shows the raw ID', async (format, i) => {
    const { ids } = (await (await fetch(`${server.url}/v1/ids/f${i}?count=50`)).json()) as { ids: string[] };
    expectNoDuplicates(ids);
    expect(ids).toHaveLength(50);
    const raws: string[] = [];
    for (const id of ids.slice(0, 10)) {
      const decoded = (await (await fetch(`${server.url}/v1/decode/${encodeURIComponent(id)}?bizTag=f${i}`)).json()) as {
        id: string;
        raw?: string;
        format?: string;
      };
      raws.push(decoded.raw ?? decoded.id);
      if (format !== 'decimal') expect(decoded.format).toBe(format);
    }
    // The raw IDs are the tag's plain sequence: formatting happens at the edge only.
    expect(raws.map(Number)).toEqual(Array.from({ length: 10 }, (_, k) => Number(raws[0]) + k));
    if (format === 'obfuscated') for (const id of ids) expect(BigInt(id) < 1n << 53n).toBe(true);
    if (format !== 'decimal') {
      const bad = await fetch(`${server.url}/v1/decode/${encodeURIComponent('!!nope!!')}?bizTag=f${i}`);
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { error: { message: string } }).error.message).toContain(`format ${format}`);
    }
  });

  it.each(FORMATS.map((f, i) => [f, i] as const))(
    '%s: the SDK hands out the formatted IDs with nextString, which decode to distinct raw IDs',
    async (format, i) => {
      const { format: said } = (await (await fetch(`${server.url}/v1/ids/f${i}?count=1`)).json()) as { format?: string };
      expect(said).toBe(format === 'decimal' ? undefined : format);
      const client = createIdmintClient({ url: server.url, batchSize: 100 });
      try {
        const ids = [...(await client.nextStrings(`f${i}`, 250)), await client.nextString(`f${i}`)];
        for (let k = 0; k < 50; k++) ids.push(client.tryNextString(`f${i}`) ?? (await client.nextString(`f${i}`)));
        expectNoDuplicates(ids);
        const raws = new Set<string>();
        for (const id of ids.slice(0, 40)) {
          const decoded = (await (await fetch(`${server.url}/v1/decode/${encodeURIComponent(id)}?bizTag=f${i}`)).json()) as { id: string; raw?: string };
          raws.add(decoded.raw ?? decoded.id);
        }
        expect(raws.size).toBe(40);
        if (format === 'decimal' || format === 'obfuscated') {
          // Still decimal numbers: next() hands them out as bigints.
          expect(typeof (await client.next(`f${i}`))).toBe('bigint');
        } else {
          await expect(client.next(`f${i}`)).rejects.toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('nextString') });
          // The refused ID stays buffered for nextString: nothing is lost.
          expect(typeof (await client.nextString(`f${i}`))).toBe('string');
        }
      } finally {
        await client.close();
      }
    },
  );

  it('a Snowflake tag can be obfuscated over its 63 bits and decodes to its fields', async () => {
    const { ids } = (await (await fetch(`${server.url}/v1/ids/flake?count=3`)).json()) as { ids: string[] };
    const decoded = (await (await fetch(`${server.url}/v1/decode/${ids[0]}?bizTag=flake`)).json()) as { raw: string; worker: number };
    expect(BigInt(decoded.raw) >= 1n << 53n).toBe(true);
    expect(decoded).toHaveProperty('worker');
    expect(decoded).toHaveProperty('time');
  });

  it('refuses blocks of a formatted tag, a format change, and a new maxLimit on an obfuscated tag', async () => {
    expect((await fetch(`${server.url}/v1/blocks/f1?count=10`)).status).toBe(400);
    const change = await fetch(`${server.url}/v1/biz/f1`, { method: 'PATCH', headers: admin, body: '{"format":"decimal"}' });
    expect(change.status).toBe(400);
    const limit = await fetch(`${server.url}/v1/biz/f1`, { method: 'PATCH', headers: admin, body: '{"maxLimit":1000000}' });
    expect(limit.status).toBe(400);
  });

  it('an obfuscated tag repeats nothing across a restart', async () => {
    const before = ((await (await fetch(`${server.url}/v1/ids/f1?count=5000`)).json()) as { ids: string[] }).ids;
    await server.stop('SIGKILL');
    server = await spawnServer(env());
    const after = ((await (await fetch(`${server.url}/v1/ids/f1?count=5000`)).json()) as { ids: string[] }).ids;
    const distinct = [...before, ...after];
    expectNoDuplicates(distinct);
    expect(distinct).toHaveLength(10_000);
  });

  it('without IDMINT_OBFUSCATION_KEY, an obfuscated format is refused at creation, naming the variable', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'idmint-formats-nokey-'));
    const keyless = await spawnServer({ IDMINT_DATA_DIR: dir, IDMINT_ADMIN_TOKEN: TOKEN });
    try {
      const response = await fetch(`${keyless.url}/v1/biz`, {
        method: 'POST',
        headers: admin,
        body: JSON.stringify({ bizTag: 'secret', format: 'obfuscated' }),
      });
      expect(response.status).toBe(400);
      expect(((await response.json()) as { error: { message: string } }).error.message).toMatch(/IDMINT_OBFUSCATION_KEY/);
      expect(
        (await fetch(`${keyless.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify({ bizTag: 'short', format: 'base62' }) })).status,
      ).toBe(201);
    } finally {
      await keyless.stop('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
