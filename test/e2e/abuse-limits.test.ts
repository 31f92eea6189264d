import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';
import { until } from '../support/poll.js';
import { expectNoDuplicates } from '../support/unique.js';
import { createIdmintClient } from '../../src/client/index.js';
import { idmint } from '../support/cli.js';

const TOKEN = 'abuse-admin-token';
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

async function start(env: Record<string, string> = {}): Promise<{ server: SpawnedServer; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-abuse-'));
  return { server: await spawnServer({ IDMINT_DATA_DIR: dir, IDMINT_ADMIN_TOKEN: TOKEN, ...env }), dir };
}

const createTag = (url: string, body: Record<string, unknown>) => fetch(`${url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify(body) });
const errorOf = async (response: Response) => ((await response.json()) as { error: { code: string; message: string } }).error;

describe('nobody burns a tag: per-tag tokens and the exhaustion warning', () => {
  let s: { server: SpawnedServer; dir: string };
  beforeAll(async () => {
    s = await start();
    await createTag(s.server.url, { bizTag: 'vault', step: 100 });
    await createTag(s.server.url, { bizTag: 'open', step: 100 });
    await createTag(s.server.url, { bizTag: 'bounded', step: 1000, maxLimit: 5_000_000 });
  });
  afterAll(async () => {
    await s?.server.stop('SIGKILL');
    if (s) rmSync(s.dir, { recursive: true, force: true });
  });

  it('a tag with tokens hands out IDs only for one of them; tokens are shown once, listed by prefix, revocable', async () => {
    const url = s.server.url;
    expect((await fetch(`${url}/v1/ids/vault`)).status).toBe(200);
    const created = await fetch(`${url}/v1/biz/vault/tokens`, { method: 'POST', headers: admin });
    expect(created.status).toBe(201);
    const { id, token, prefix } = (await created.json()) as { id: string; token: string; prefix: string };
    expect(token).toMatch(/^imt_[A-Za-z0-9_-]{32}$/);
    expect(token.startsWith(prefix)).toBe(true);

    const missing = await fetch(`${url}/v1/ids/vault`);
    expect(missing.status).toBe(401);
    expect((await errorOf(missing)).message).toMatch(/requires a tag token/);
    expect((await errorOf(await fetch(`${url}/v1/ids/vault?token=imt_wrong`))).message).toMatch(/wrong tag token/);
    expect((await fetch(`${url}/v1/ids/vault?token=${token}&count=3`)).status).toBe(200);
    expect((await fetch(`${url}/v1/ids/vault`, { headers: { 'x-idmint-token': token } })).status).toBe(200);
    // The Leaf route checks the same token; other tags stay open.
    expect((await fetch(`${url}/api/segment/get/vault`)).status).toBe(401);
    expect((await fetch(`${url}/api/segment/get/vault?token=${token}`)).status).toBe(200);
    expect((await fetch(`${url}/v1/ids/open`)).status).toBe(200);

    const listed = (await (await fetch(`${url}/v1/biz/vault/tokens`, { headers: admin })).json()) as { tokens: Array<Record<string, string>> };
    expect(listed.tokens).toEqual([{ id, prefix, createdAt: expect.any(String) }]);
    expect(JSON.stringify(listed)).not.toContain(token);
    expect((await fetch(`${url}/v1/biz/vault/tokens`, { method: 'POST' })).status).toBe(401);

    // Rotation: a second token, then the first revoked.
    const second = ((await (await fetch(`${url}/v1/biz/vault/tokens`, { method: 'POST', headers: admin })).json()) as { token: string }).token;
    expect((await fetch(`${url}/v1/biz/vault/tokens/${id}`, { method: 'DELETE', headers: admin })).status).toBe(204);
    expect((await fetch(`${url}/v1/ids/vault?token=${token}`)).status).toBe(401);
    expect((await fetch(`${url}/v1/ids/vault?token=${second}`)).status).toBe(200);
    expect((await fetch(`${url}/v1/biz/vault/tokens/${id}`, { method: 'DELETE', headers: admin })).status).toBe(400);
  });

  it('revoking the last token keeps the tag closed to everyone until an admin opens it', async () => {
    const url = s.server.url;
    await createTag(url, { bizTag: 'leaky', step: 100 });
    const { id, token } = (await (await fetch(`${url}/v1/biz/leaky/tokens`, { method: 'POST', headers: admin })).json()) as { id: string; token: string };
    expect((await fetch(`${url}/v1/ids/leaky?token=${token}`)).status).toBe(200);
    // The token leaked: the operator revokes it. Nobody gets IDs now, with or without it.
    expect((await fetch(`${url}/v1/biz/leaky/tokens/${id}`, { method: 'DELETE', headers: admin })).status).toBe(204);
    const without = await fetch(`${url}/v1/ids/leaky`);
    expect(without.status).toBe(401);
    expect((await errorOf(without)).message).toMatch(/requires a tag token/);
    expect((await fetch(`${url}/v1/ids/leaky?token=${token}`)).status).toBe(401);
    expect((await fetch(`${url}/api/segment/get/leaky`)).status).toBe(401);
    const listed = (await (await fetch(`${url}/v1/biz/leaky/tokens`, { headers: admin })).json()) as { tokens: Array<Record<string, string>> };
    expect(listed.tokens).toEqual([expect.objectContaining({ id, revokedAt: expect.any(String) })]);
    // Opening it is a decision of its own.
    expect((await fetch(`${url}/v1/biz/leaky/tokens`, { method: 'DELETE' })).status).toBe(401);
    const opened = await fetch(`${url}/v1/biz/leaky/tokens`, { method: 'DELETE', headers: admin });
    expect(await opened.json()).toEqual({ bizTag: 'leaky', open: true, removed: 1 });
    expect((await fetch(`${url}/v1/ids/leaky`)).status).toBe(200);
  });

  it("idmint's own clients carry tag tokens: the CLI's get --token and IDMINT_TAG_TOKEN, biz token create|list|revoke, and the SDK", async () => {
    const url = s.server.url;
    const env = { IDMINT_URL: url, IDMINT_ADMIN_TOKEN: TOKEN, IDMINT_TAG_TOKEN: '' };
    await createTag(url, { bizTag: 'precious', step: 100 });
    const created = await idmint(['biz', 'token', 'create', 'precious'], env);
    expect(created.code, created.stderr).toBe(0);
    const { id, token } = JSON.parse(created.stdout) as { id: string; token: string };

    const refused = await idmint(['get', 'precious', '-n', '2'], env);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('UNAUTHORIZED');
    expect(refused.stderr).toContain('--token');
    expect(refused.stderr).toContain('IDMINT_TAG_TOKEN');
    expect(refused.stderr).not.toContain('IDMINT_GATE_PASS');
    const byFlag = await idmint(['get', 'precious', '-n', '2', '--token', token], env);
    expect(byFlag.code, byFlag.stderr).toBe(0);
    expect(byFlag.stdout.trim().split('\n')).toHaveLength(2);
    const byEnv = await idmint(['get', 'precious'], { ...env, IDMINT_TAG_TOKEN: token });
    expect(byEnv.code, byEnv.stderr).toBe(0);

    const client = createIdmintClient({ url, token, batchSize: 10 });
    const perTag = createIdmintClient({ url, tokens: { precious: token } });
    const tokenless = createIdmintClient({ url, timeoutMs: 2000 });
    try {
      const ids = await Promise.all(Array.from({ length: 50 }, () => client.next('precious')));
      ids.push(await perTag.next('precious'));
      expectNoDuplicates(ids.map(String));
      await expect(tokenless.next('precious')).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    } finally {
      await Promise.all([client.close(), perTag.close(), tokenless.close()]);
    }

    const listed = await idmint(['biz', 'token', 'list', 'precious'], env);
    expect(listed.stdout).toContain(token.slice(0, 8));
    expect(listed.stdout).not.toContain(token);
    expect((await idmint(['biz', 'token', 'revoke', 'precious', id], env)).code).toBe(0);
    expect((await idmint(['get', 'precious', '--token', token], env)).code).not.toBe(0);
    expect((await idmint(['biz', 'token', 'list', 'precious'], env)).stdout).toContain('closed to every caller');
    expect((await idmint(['biz', 'token', 'open', 'precious'], env)).stdout).toContain('open to every caller');
    expect((await idmint(['get', 'precious'], env)).code).toBe(0);
  });

  it('warns when a limited tag runs out within IDMINT_EXHAUSTION_WARN_DAYS at the current rate', async () => {
    const url = s.server.url;
    const metric = async (): Promise<string> => (await fetch(`${url}/metrics`)).text();
    await metric(); // the first sample
    // Load for a while: the rate is sampled at most every 5 s (EXHAUSTION_SAMPLE_MS).
    const loadUntil = Date.now() + 5500;
    while (Date.now() < loadUntil) await fetch(`${url}/v1/ids/bounded?count=1000`);
    const text = await metric();
    expect(text).toMatch(/^idmint_tag_exhaustion_warning\{biz_tag="bounded"\} 1$/m);
    const days = Number(/^idmint_tag_days_left\{biz_tag="bounded"\} (\S+)$/m.exec(text)?.[1]);
    expect(days).toBeGreaterThanOrEqual(0);
    expect(days).toBeLessThan(30);
    expect(text).not.toMatch(/idmint_tag_days_left\{biz_tag="open"\}/);
    // The log line travels on the server's stdout pipe, not with the HTTP answer: wait for it.
    await until('the exhaustion warning in the log', () => /tag \\"bounded\\" runs out of IDs within 30 days/.test(s.server.output()), {
      timeoutMs: 10_000,
      detail: s.server.output,
    });
    // Requests past max_limit are refused with SEGMENT_EXHAUSTED; the log says so once, not per request.
    expect(s.server.output().match(/reached its max_limit/g)?.length ?? 0).toBeLessThanOrEqual(1);
  });
});

describe('rate limits per client and per tag', () => {
  let s: { server: SpawnedServer; dir: string };
  beforeAll(async () => {
    s = await start({ IDMINT_RATE_LIMIT_CLIENT: '12', IDMINT_RATE_LIMIT_TAG: '5', IDMINT_RATE_LIMIT_WINDOW_MS: '60000' });
    for (const bizTag of ['a', 'b', 'c']) await createTag(s.server.url, { bizTag, step: 100 });
  });
  afterAll(async () => {
    await s?.server.stop('SIGKILL');
    if (s) rmSync(s.dir, { recursive: true, force: true });
  });

  it("answers 429 RATE_LIMITED with Retry-After past a tag's limit, then past the client's", async () => {
    const url = s.server.url;
    for (let i = 0; i < 5; i++) expect((await fetch(`${url}/v1/ids/a`)).status).toBe(200);
    const limited = await fetch(`${url}/v1/ids/a`);
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(await errorOf(limited)).toMatchObject({ code: 'RATE_LIMITED', message: expect.stringMatching(/5 requests per 60000 ms/) });
    // Another tag has its own budget, until the client's runs out: 12 requests in all, refused ones included.
    for (let i = 0; i < 5; i++) expect((await fetch(`${url}/v1/ids/b`)).status).toBe(200);
    expect((await fetch(`${url}/v1/ids/c`)).status).toBe(200);
    const client = await fetch(`${url}/v1/ids/c`);
    expect(client.status).toBe(429);
    expect((await errorOf(client)).message).toMatch(/12 requests per 60000 ms/);
    // Admin and health routes are not limited.
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect((await fetch(`${url}/v1/biz`, { headers: admin })).status).toBe(200);
  });
});
