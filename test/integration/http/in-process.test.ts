import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/app/config.js';
import { startRuntime, type Runtime } from '../../../src/app/runtime.js';
import { ERROR_CODES } from '../../../src/core/errors.js';
import { silentLogger } from '../../../src/core/logger.js';

// The HTTP contract in process: the embedded runtime, driven with fastify's inject() (no socket),
// for every route and every row of the error table (docs/http-api.md) that an embedded server can reach.
// The spawned-process e2e tests keep what needs a process (restarts, SIGKILL, locks, the CLI).
const TOKEN = 'in-process-admin-token';
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

let dir: string;
let runtime: Runtime;

async function start(extra: Record<string, string> = {}): Promise<Runtime> {
  const dataDir = mkdtempSync(join(dir, 'data-'));
  return startRuntime({ config: loadConfig({ IDMINT_DATA_DIR: dataDir, IDMINT_PORT: '0', IDMINT_ADMIN_TOKEN: TOKEN, ...extra }), logger: silentLogger });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'idmint-inproc-'));
  runtime = await start();
});

afterAll(async () => {
  await runtime?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function errorOf(response: { statusCode: number; json(): unknown }, status: number, code: string): Promise<void> {
  expect(response.statusCode).toBe(status);
  const body = response.json() as { error: { code: string; message: string } };
  expect(body.error.code).toBe(code);
  expect(ERROR_CODES).toHaveProperty(code);
  expect(body.error.message.length).toBeGreaterThan(0);
}

describe('HTTP in process: every route', () => {
  it('IDs, blocks, decode, Leaf routes', async () => {
    const ids = await runtime.app.inject({ url: '/v1/ids/demo?count=3' });
    expect(ids.json()).toMatchObject({ bizTag: 'demo', ids: expect.any(Array), source: 'pool' });
    const blocks = await runtime.app.inject({ url: '/v1/blocks/demo?count=1000' });
    expect(blocks.json()).toMatchObject({ bizTag: 'demo', blocks: [expect.objectContaining({ start: expect.any(String) })] });
    const decoded = await runtime.app.inject({ url: `/v1/decode/${(ids.json() as { ids: string[] }).ids[0]}?bizTag=demo` });
    expect(decoded.json()).toMatchObject({ layoutFrom: 'bizTag' });
    expect((await runtime.app.inject({ url: '/api/segment/get/demo' })).body).toMatch(/^\d+$/);
    const flake = (await runtime.app.inject({ url: '/api/snowflake/get/x' })).body;
    expect(flake).toMatch(/^\d{16,19}$/);
    expect((await runtime.app.inject({ url: `/decodeSnowflakeId?snowflakeId=${flake}` })).json()).toHaveProperty('workerId');
  });

  it('tag administration and tokens', async () => {
    expect((await runtime.app.inject({ method: 'POST', url: '/v1/biz', headers: admin, payload: { bizTag: 'inproc', step: 100 } })).statusCode).toBe(201);
    expect((await runtime.app.inject({ url: '/v1/biz', headers: admin })).json()).toMatchObject({
      tags: expect.arrayContaining([expect.objectContaining({ bizTag: 'inproc' })]),
    });
    expect((await runtime.app.inject({ url: '/v1/biz/inproc', headers: admin })).json()).toMatchObject({ step: 100 });
    expect((await runtime.app.inject({ method: 'PATCH', url: '/v1/biz/inproc', headers: admin, payload: { description: 'x' } })).json()).toMatchObject({
      description: 'x',
    });
    const token = (await runtime.app.inject({ method: 'POST', url: '/v1/biz/inproc/tokens', headers: admin })).json() as { id: string; token: string };
    expect((await runtime.app.inject({ url: '/v1/biz/inproc/tokens', headers: admin })).json()).toMatchObject({
      tokens: [expect.objectContaining({ id: token.id })],
    });
    expect((await runtime.app.inject({ url: `/v1/ids/inproc?token=${token.token}` })).statusCode).toBe(200);
    expect((await runtime.app.inject({ method: 'DELETE', url: `/v1/biz/inproc/tokens/${token.id}`, headers: admin })).statusCode).toBe(204);
    expect((await runtime.app.inject({ method: 'DELETE', url: '/v1/biz/inproc', headers: admin })).statusCode).toBe(204);
  });

  it('operations: health, readiness, metrics, stats, status', async () => {
    expect((await runtime.app.inject({ url: '/healthz' })).json()).toEqual({ status: 'ok' });
    expect((await runtime.app.inject({ url: '/readyz' })).json()).toMatchObject({ status: 'ready' });
    expect((await runtime.app.inject({ url: '/metrics' })).body).toContain('idmint_ids_issued_total');
    expect((await runtime.app.inject({ url: '/v1/stats', headers: admin })).statusCode).toBe(200);
    expect((await runtime.app.inject({ url: '/status.json', headers: admin })).json()).toHaveProperty('tags');
    expect((await runtime.app.inject({ url: '/status', headers: admin })).headers['content-type']).toMatch(/text\/html/);
  });
});

describe('HTTP in process: the error table', () => {
  it('UNKNOWN_BIZ_TAG 404, BIZ_TAG_EXISTS 409, BAD_REQUEST 400, UNAUTHORIZED 401', async () => {
    await errorOf(await runtime.app.inject({ url: '/v1/ids/nope' }), 404, 'UNKNOWN_BIZ_TAG');
    await errorOf(await runtime.app.inject({ method: 'POST', url: '/v1/biz', headers: admin, payload: { bizTag: 'demo' } }), 409, 'BIZ_TAG_EXISTS');
    await errorOf(await runtime.app.inject({ url: '/v1/ids/demo?count=0' }), 400, 'BAD_REQUEST');
    await errorOf(await runtime.app.inject({ url: '/v1/ids/Bad_Tag' }), 400, 'BAD_REQUEST');
    await errorOf(await runtime.app.inject({ method: 'POST', url: '/v1/biz', headers: { ...admin }, payload: '{nope' }), 400, 'BAD_REQUEST');
    await errorOf(await runtime.app.inject({ url: '/v1/biz' }), 401, 'UNAUTHORIZED');
    await errorOf(await runtime.app.inject({ url: '/v1/biz', headers: { authorization: 'Bearer wrong-token-x' } }), 401, 'UNAUTHORIZED');
  });

  it('SEGMENT_EXHAUSTED 409, with nothing consumed by a request larger than what remains', async () => {
    await runtime.app.inject({ method: 'POST', url: '/v1/biz', headers: admin, payload: { bizTag: 'tiny', maxLimit: 3 } });
    await errorOf(await runtime.app.inject({ url: '/v1/ids/tiny?count=4' }), 409, 'SEGMENT_EXHAUSTED');
    expect((await runtime.app.inject({ url: '/v1/ids/tiny?count=3' })).json()).toMatchObject({ ids: ['1', '2', '3'] });
    await errorOf(await runtime.app.inject({ url: '/v1/ids/tiny' }), 409, 'SEGMENT_EXHAUSTED');
  });

  it('RATE_LIMITED 429 with Retry-After', async () => {
    const limited = await start({ IDMINT_RATE_LIMIT_CLIENT: '2', IDMINT_RATE_LIMIT_WINDOW_MS: '60000' });
    try {
      for (let i = 0; i < 2; i++) expect((await limited.app.inject({ url: '/v1/ids/demo' })).statusCode).toBe(200);
      const refused = await limited.app.inject({ url: '/v1/ids/demo' });
      await errorOf(refused, 429, 'RATE_LIMITED');
      expect(refused.headers['retry-after']).toBeDefined();
    } finally {
      await limited.close();
    }
  });

  it('NOT_READY 503 once the server is stopping', async () => {
    const stopping = await start();
    await stopping.close();
    const response = await stopping.app.inject({ url: '/v1/ids/demo' }).catch(() => undefined);
    // A closed fastify answers 503 (return503OnClosing) or refuses the injection outright.
    if (response) expect(response.statusCode).toBe(503);
  });
});

describe('HTTP in process: OpenAPI', () => {
  it('/openapi.json lists every route and validates as OpenAPI 3; /docs serves the docs page', async () => {
    const { Validator } = await import('@seriousme/openapi-schema-validator');
    const response = await runtime.app.inject({ url: '/openapi.json' });
    expect(response.statusCode).toBe(200);
    const doc = response.json() as { openapi: string; info: { version: string }; paths: Record<string, Record<string, unknown>> };
    const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(doc.info.version).toBe(pkg.version);
    const result = await new Validator().validate(doc as never);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    // Every route of the HTTP contract (docs/http-api.md, its routes table) is served and documented.
    const contract = [
      'GET /v1/ids/:bizTag',
      'GET /v1/blocks/:bizTag',
      'GET /v1/decode/:id',
      'POST /v1/biz',
      'GET /v1/biz',
      'GET /v1/biz/:bizTag',
      'PATCH /v1/biz/:bizTag',
      'DELETE /v1/biz/:bizTag',
      'POST /v1/biz/:bizTag/tokens',
      'GET /v1/biz/:bizTag/tokens',
      'DELETE /v1/biz/:bizTag/tokens/:id',
      'GET /api/segment/get/:key',
      'GET /api/snowflake/get/:key',
      'GET /decodeSnowflakeId',
      'GET /healthz',
      'GET /readyz',
      'GET /metrics',
      'GET /v1/stats',
      'GET /status',
      'GET /status.json',
    ];
    const documented = new Set(Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`)));
    const toOpenApi = (path: string): string => path.replace(/:([A-Za-z]+)/g, '{$1}');
    const missing: string[] = [];
    for (const route of contract) {
      const [method, url] = route.split(' ') as [string, string];
      expect(runtime.app.hasRoute({ method: method as 'GET', url }), `${route} is not served`).toBe(true);
      if (!documented.has(`${method} ${toOpenApi(url)}`)) missing.push(route);
    }
    expect(missing).toEqual([]);
    const docs = await runtime.app.inject({ url: '/docs' });
    expect([200, 302]).toContain(docs.statusCode);
  });
});
