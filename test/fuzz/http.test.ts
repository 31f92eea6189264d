import { request } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/core/errors.js';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';
import { fuzzParameters, STACK_TRACE } from './runs.js';

// Random paths, query strings, headers and bodies against a real embedded server. Every answer
// must be a documented one: a 2xx, or a 4xx/503/504 carrying {"error":{"code","message"}} with a
// known code; never another 5xx, never a stack trace; and the server stays healthy.
const TOKEN = 'fuzz-admin-token';
const ROUTES = [
  '/v1/ids/',
  '/v1/decode/',
  '/v1/biz/',
  '/v1/biz',
  '/api/segment/get/',
  '/api/snowflake/get/',
  '/decodeSnowflakeId',
  '/healthz',
  '/readyz',
  '/v1/stats',
  '/status.json',
  '/',
];
const HTML_OR_TEXT = /^\/(metrics|status|ui|api\/(segment|snowflake)\/get)/;

interface Answer {
  status: number;
  type: string;
  body: string;
}

function send(base: URL, method: string, path: string, headers: Record<string, string>, body: string | undefined): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: base.hostname, port: base.port, method, path, headers, timeout: 10_000, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type'] ?? ''), body: text }));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer to ${method} ${path} within 10 s`)));
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

const segment = fc.oneof(
  fc.constantFrom('demo', 'order', 'DEMO', '%', '%zz', '..', '%00', 'a'.repeat(300), '-1', '9'.repeat(40), '0x10', '%20'),
  fc.string({ maxLength: 20 }).map(encodeURIComponent),
  fc.stringMatching(/^[a-z0-9._-]{1,30}$/),
);
const query = fc.oneof(
  fc.constant(''),
  fc
    .dictionary(
      fc.constantFrom('count', 'bizTag', 'gatePass', 'token', 'snowflakeId', 'x'),
      fc.oneof(fc.integer({ min: -5, max: 200_000 }).map(String), fc.string({ maxLength: 12 }), fc.constantFrom('1e3', '0x10', '', 'NaN', '1.5')),
      { maxKeys: 3 },
    )
    .map((q) => `?${new URLSearchParams(q).toString()}`),
  fc.constantFrom('?count=1&count=2', '?%', '?count', '?=&&='),
);
const headers = fc.record(
  {
    authorization: fc.constantFrom(`Bearer ${TOKEN}`, 'Bearer', `Bearer ${TOKEN} x`, 'Basic Zm9v', 'Basic', 'garbage'),
    'content-type': fc.constantFrom('application/json', 'text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1'),
    'x-idmint-token': fc.string({ maxLength: 10 }).filter((s) => /^[\x21-\x7e]*$/.test(s)),
  },
  { requiredKeys: [] },
);
const body = fc.option(
  fc.oneof(
    fc.json({ maxDepth: 2 }),
    fc.string({ maxLength: 50 }),
    fc
      .record(
        {
          bizTag: segment,
          mode: fc.string({ maxLength: 8 }),
          step: fc.oneof(fc.integer(), fc.string({ maxLength: 5 })),
          maxLimit: fc.oneof(fc.integer(), fc.constant(null)),
          description: fc.string({ maxLength: 10 }),
        },
        { requiredKeys: [] },
      )
      .map((b) => JSON.stringify(b)),
  ),
  { nil: undefined },
);

describe('HTTP API under fuzzing (fast-check, real embedded server)', () => {
  let dataDir: string;
  let server: SpawnedServer;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-fuzz-http-'));
    server = await spawnServer({ IDMINT_DATA_DIR: dataDir, IDMINT_ADMIN_TOKEN: TOKEN });
  });

  afterAll(async () => {
    await server?.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('answers every request with a documented status and body, never a stack trace, and stays healthy', async () => {
    const base = new URL(server.url);
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('GET', 'GET', 'POST', 'PATCH', 'DELETE', 'PUT', 'HEAD', 'OPTIONS'),
        fc.constantFrom(...ROUTES),
        segment,
        query,
        headers,
        body,
        async (method, route, seg, q, h, b) => {
          const path = `${route}${route.endsWith('/') ? seg : ''}${q}`;
          const answer = await send(base, method, path, h, method === 'GET' || method === 'HEAD' ? undefined : b);
          const what = `${method} ${path} -> ${answer.status} ${answer.body.slice(0, 300)}`;
          expect(answer.body, what).not.toMatch(STACK_TRACE);
          expect([500, 501, 502].includes(answer.status) || answer.status > 504, what).toBe(false);
          if (answer.status >= 400 && method !== 'HEAD' && !HTML_OR_TEXT.test(path)) {
            const parsed = JSON.parse(answer.body) as { error?: { code?: string; message?: string } };
            expect(Object.keys(ERROR_CODES), what).toContain(parsed.error?.code);
            expect(typeof parsed.error?.message, what).toBe('string');
            if (answer.status >= 500)
              expect(['NOT_READY', 'POOL_EMPTY', 'TIMEOUT', 'CLOCK_BACKWARDS', 'WORKER_ID_UNAVAILABLE'], what).toContain(parsed.error?.code);
          }
        },
      ),
      fuzzParameters,
    );
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    // Still serving: a tag created now hands out IDs (the fuzzer holds the admin token, so it may
    // have deleted or reshaped `demo` and any name it can spell).
    const bizTag = `after-fuzz-${Date.now()}`;
    const created = await fetch(`${server.url}/v1/biz`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ bizTag }),
    });
    expect(created.status, await created.clone().text()).toBe(201);
    expect((await fetch(`${server.url}/v1/ids/${bizTag}?count=10`)).status).toBe(200);
  });
});
