import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/app/config.js';
import { startRuntime, type Runtime } from '../../../src/app/runtime.js';
import { silentLogger } from '../../../src/core/logger.js';

// `/v1/decode/:id?bizTag=` on the embedded runtime through inject(): what the probe of issue 42
// found — long sqids input answered 503, a token-protected tag's obfuscation was undone for anyone,
// and the answer's `id` was the raw ID instead of the one asked about.
const TOKEN = 'decode-admin-token';
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

let dir: string;
let runtime: Runtime;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'idmint-decode-'));
  const config = loadConfig({ IDMINT_DATA_DIR: dir, IDMINT_PORT: '0', IDMINT_ADMIN_TOKEN: TOKEN, IDMINT_OBFUSCATION_KEY: 'decode-test-obfuscation-key-01' });
  runtime = await startRuntime({ config, logger: silentLogger });
  for (const [bizTag, format, mode] of [
    ['sq', 'sqids', 'segment'],
    ['ob', 'obfuscated', 'segment'],
    ['obflake', 'obfuscated+base62', 'snowflake'],
    ['plain', 'decimal', 'segment'],
  ]) {
    const created = await runtime.app.inject({ method: 'POST', url: '/v1/biz', headers: admin, payload: { bizTag, format, mode } });
    expect(created.statusCode, created.body).toBe(201);
  }
});

afterAll(async () => {
  await runtime?.close();
  rmSync(dir, { recursive: true, force: true });
});

const idsOf = async (bizTag: string, query = ''): Promise<string[]> => {
  const response = await runtime.app.inject({ url: `/v1/ids/${bizTag}?count=3${query}` });
  expect(response.statusCode, response.body).toBe(200);
  return (response.json() as { ids: string[] }).ids;
};

describe('/v1/decode with a tag', () => {
  it('long or out-of-range sqids input is a 400 naming the format, never a 5xx', async () => {
    // Each decodes (Sqids) to a number above 2^53, where Sqids' own encode throws.
    for (const input of ['zzzzzzzzzzzzzzzzzzzzzz', 'A'.repeat(64), '9999999999999999999999999', 'z'.repeat(250)]) {
      const response = await runtime.app.inject({ url: `/v1/decode/${input}?bizTag=sq` });
      expect(response.statusCode, `${input}: ${response.body}`).toBe(400);
      expect(response.json()).toMatchObject({ error: { code: 'BAD_REQUEST', message: expect.stringContaining('format sqids') } });
    }
  });

  it('answers with the ID asked about as `id`, the raw ID as `raw`, for every formatted mode', async () => {
    for (const bizTag of ['sq', 'ob', 'obflake']) {
      const [asked] = await idsOf(bizTag);
      const decoded = (await runtime.app.inject({ url: `/v1/decode/${encodeURIComponent(asked!)}?bizTag=${bizTag}` })).json() as { id: string; raw: string };
      expect(decoded.id, bizTag).toBe(asked);
      expect(decoded.raw, bizTag).toMatch(/^\d+$/);
      expect(decoded.raw, bizTag).not.toBe(asked);
    }
    const [plain] = await idsOf('plain');
    expect((await runtime.app.inject({ url: `/v1/decode/${plain}?bizTag=plain` })).json()).toMatchObject({ id: plain });
  });

  it("a token-protected tag's IDs decode only with its token, as they are taken", async () => {
    const [asked] = await idsOf('ob');
    const created = await runtime.app.inject({ method: 'POST', url: '/v1/biz/ob/tokens', headers: admin });
    const { token } = created.json() as { token: string };
    const url = `/v1/decode/${asked}?bizTag=ob`;
    const without = await runtime.app.inject({ url });
    expect(without.statusCode, without.body).toBe(401);
    expect(without.json()).toMatchObject({ error: { code: 'UNAUTHORIZED' } });
    expect(without.body).not.toContain('"raw"');
    expect((await runtime.app.inject({ url: `${url}&token=wrong-token` })).statusCode).toBe(401);
    const withToken = await runtime.app.inject({ url, headers: { 'x-idmint-token': token } });
    expect(withToken.statusCode, withToken.body).toBe(200);
    expect(withToken.json()).toMatchObject({ id: asked, raw: expect.any(String) });
    expect((await runtime.app.inject({ url: `${url}&token=${token}` })).statusCode).toBe(200);
    // Without a tag nothing is undone: the value is decoded as it stands, and needs no token.
    expect((await runtime.app.inject({ url: `/v1/decode/${asked}` })).statusCode).toBe(200);
  });
});
