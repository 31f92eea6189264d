import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';
import { expectNoDuplicates } from '../support/unique.js';
import { sleep, until } from '../support/poll.js';

const TOKEN = 'e2e-admin-token';
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

interface IdsAnswer {
  bizTag: string;
  ids: string[];
  source: string;
}

/** Pulls `total` IDs of `bizTag` with `clients` concurrent callers, each asking for 1..200 at a time. */
async function collect(url: () => string, bizTag: string, total: number, clients: number, into: string[], failures: string[]): Promise<void> {
  let remaining = total;
  const worker = async (): Promise<void> => {
    while (remaining > 0) {
      const count = Math.min(remaining, 1 + Math.floor(Math.random() * 200));
      remaining -= count;
      try {
        const response = await fetch(`${url()}/v1/ids/${bizTag}?count=${count}`);
        if (!response.ok) throw new Error(`${response.status} ${await response.text()}`);
        const body = (await response.json()) as IdsAnswer;
        into.push(...body.ids);
      } catch (err) {
        // The server is restarting: give the IDs back to the budget and try again shortly.
        failures.push(String(err));
        remaining += count;
        await sleep(50);
      }
    }
  };
  await Promise.all(Array.from({ length: clients }, worker));
}

describe('embedded server (idmint serve with PGlite)', () => {
  let dataDir: string;
  let server: SpawnedServer;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-e2e-'));
    server = await spawnServer({ IDMINT_DATA_DIR: dataDir, IDMINT_ADMIN_TOKEN: TOKEN });
  });

  afterAll(async () => {
    await server?.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('says first what a first start is doing: creating the embedded database, before it serves', () => {
    const lines = server.output().split('\n').filter(Boolean);
    expect(lines[0]).toMatch(/creating the embedded database \(first start/);
    expect(server.output().indexOf('creating the embedded database')).toBeLessThan(server.output().indexOf('idmint is serving'));
  });

  it('creates a demo tag on first start and serves it', async () => {
    const response = await fetch(`${server.url}/v1/ids/demo?count=3`);
    expect(response.status).toBe(200);
    const body = (await response.json()) as IdsAnswer;
    expect(body).toMatchObject({ bizTag: 'demo', source: 'pool' });
    expect(body.ids).toHaveLength(3);
    expect(body.ids.every((id) => typeof id === 'string' && /^\d+$/.test(id))).toBe(true);
  });

  it('serves 200,000 IDs to 32 concurrent clients across a graceful restart and a SIGKILL with zero duplicates', async () => {
    const created = await fetch(`${server.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify({ bizTag: 'order', step: 500 }) });
    expect(created.status).toBe(201);

    const ids: string[] = [];
    const failures: string[] = [];
    let current = server;
    const run = collect(() => current.url, 'order', 200_000, 32, ids, failures);

    // Restart twice mid-run: once gracefully, once by crash. Buffered IDs may be lost; none may repeat.
    for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
      const mark = signal === 'SIGTERM' ? 60_000 : 120_000;
      await until(`${mark} IDs before the ${signal}`, () => ids.length >= mark, { intervalMs: 20 });
      const port = new URL(current.url).port;
      await current.stop(signal);
      current = await spawnServer({ IDMINT_DATA_DIR: dataDir, IDMINT_ADMIN_TOKEN: TOKEN, IDMINT_PORT: port });
    }
    await run;
    server = current;

    expect(ids.length).toBeGreaterThanOrEqual(200_000);
    expectNoDuplicates(ids);
    // Both restarts really interrupted the clients.
    expect(failures.length).toBeGreaterThan(0);
    expect(ids.every((id) => Number(id) >= 1 && Number(id) <= Number.MAX_SAFE_INTEGER)).toBe(true);
  });

  it('stops cleanly on SIGTERM and starts again on the same data', async () => {
    const port = new URL(server.url).port;
    expect(await server.stop('SIGTERM')).toBe(0);
    expect(server.output()).toMatch(/stopped cleanly/);
    server = await spawnServer({ IDMINT_DATA_DIR: dataDir, IDMINT_ADMIN_TOKEN: TOKEN, IDMINT_PORT: port });
    expect((await fetch(`${server.url}/v1/ids/order`)).status).toBe(200);
    expect(server.output()).toMatch(/opening the embedded database/);
    expect(server.output()).not.toMatch(/creating the embedded database/);
  });

  it('refuses a second server on the same data directory with a clear message', async () => {
    await expect(spawnServer({ IDMINT_DATA_DIR: dataDir, IDMINT_ADMIN_TOKEN: TOKEN }, { timeoutMs: 30_000 })).rejects.toThrow(
      /data directory .* is in use by process \d+/,
    );
  });

  it('answers Leaf-compatible routes with plain-text IDs', async () => {
    const response = await fetch(`${server.url}/api/segment/get/order`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await response.text()).toMatch(/^\d+$/);
  });

  it('serves snowflake, uid and sharded tags with unique IDs in their own spaces', async () => {
    for (const [bizTag, mode] of [
      ['trace', 'snowflake'],
      ['session', 'uid'],
      ['shop-order', 'sharded'],
    ] as const) {
      const created = await fetch(`${server.url}/v1/biz`, {
        method: 'POST',
        headers: admin,
        body: JSON.stringify({ bizTag, mode, ...(mode === 'sharded' ? { shards: 4 } : {}) }),
      });
      expect(created.status).toBe(201);
    }
    const pull = async (bizTag: string): Promise<string[]> => {
      const ids: string[] = [];
      const failures: string[] = [];
      await collect(() => server.url, bizTag, 20_000, 16, ids, failures);
      expect(failures).toEqual([]);
      return ids;
    };
    const trace = await pull('trace');
    const session = await pull('session');
    const shop = await pull('shop-order');
    for (const ids of [trace, session, shop]) expectNoDuplicates(ids);
    // Invariant 4: time-based IDs live at or above 2^53; sharded IDs stay below it.
    expect(trace.every((id) => BigInt(id) >= 1n << 53n)).toBe(true);
    expect(session.every((id) => BigInt(id) >= 1n << 53n)).toBe(true);
    expect(shop.every((id) => BigInt(id) < 1n << 53n)).toBe(true);

    const decoded = (await (await fetch(`${server.url}/v1/decode/${trace[0]}?bizTag=trace`)).json()) as Record<string, unknown>;
    expect(decoded).toMatchObject({ type: 'snowflake', layout: 'leaf' });
    expect(Math.abs(Date.parse(String(decoded.time)) - Date.now())).toBeLessThan(10 * 60_000);
    const uid = (await (await fetch(`${server.url}/v1/decode/${session[0]}?bizTag=session`)).json()) as Record<string, unknown>;
    expect(uid).toMatchObject({ type: 'uid' });
    const sharded = (await (await fetch(`${server.url}/v1/decode/${shop[0]}?bizTag=shop-order`)).json()) as { type: string; app: number };
    expect(sharded).toMatchObject({ type: 'sharded', app: 0 });
    // Requests rotate over the tag's 4 shards; the shard sits in bits 8..13.
    const shards = new Set(shop.map((id) => Number((BigInt(id) >> 8n) & 63n)));
    expect([...shards].sort()).toEqual([0, 1, 2, 3]);
  });

  it('answers Leaf-compatible Snowflake routes', async () => {
    const response = await fetch(`${server.url}/api/snowflake/get/anything`);
    expect(response.status).toBe(200);
    const id = await response.text();
    expect(BigInt(id) >= 1n << 53n).toBe(true);
    const decoded = (await (await fetch(`${server.url}/decodeSnowflakeId?snowflakeId=${id}`)).json()) as Record<string, string>;
    expect(decoded.timestamp).toMatch(/^\d{13}\(\d{4}-\d\d-\d\dT/);
    expect(decoded.workerId).toMatch(/^\d+$/);
    expect(decoded.sequenceId).toMatch(/^\d+$/);
  });

  const bad: Array<[string, string, RequestInit | undefined, number, string, RegExp]> = [
    ['unknown tag', '/v1/ids/nope', undefined, 404, 'UNKNOWN_BIZ_TAG', /nope/],
    ['count zero', '/v1/ids/order?count=0', undefined, 400, 'BAD_REQUEST', /count/],
    ['count too large', '/v1/ids/order?count=10001', undefined, 400, 'BAD_REQUEST', /count/],
    ['count not a number', '/v1/ids/order?count=ten', undefined, 400, 'BAD_REQUEST', /count/],
    ['count with junk', '/v1/ids/order?count=10abc', undefined, 400, 'BAD_REQUEST', /count/],
    ['bad tag name', '/v1/ids/Order!', undefined, 400, 'BAD_REQUEST', /bizTag/],
    ['decode non-numeric', '/v1/decode/abc', undefined, 400, 'BAD_REQUEST', /id/],
    ['decode out of range', '/v1/decode/9223372036854775808', undefined, 400, 'BAD_REQUEST', /id/],
    ['decode zero', '/v1/decode/0', undefined, 400, 'BAD_REQUEST', /id/],
    ['decode with unknown tag', '/v1/decode/5?bizTag=nope', undefined, 404, 'UNKNOWN_BIZ_TAG', /nope/],
    ['Leaf decode without id', '/decodeSnowflakeId', undefined, 400, 'BAD_REQUEST', /snowflakeId/],
    [
      'admin without token',
      '/v1/biz',
      { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"bizTag":"x1"}' },
      401,
      'UNAUTHORIZED',
      /Authorization/,
    ],
    ['admin with wrong token', '/v1/biz', { method: 'GET', headers: { authorization: 'Bearer wrong-token' } }, 401, 'UNAUTHORIZED', /wrong/],
    ['create without bizTag', '/v1/biz', { method: 'POST', headers: admin, body: '{"step":10}' }, 400, 'BAD_REQUEST', /bizTag/],
    ['create with wrong type', '/v1/biz', { method: 'POST', headers: admin, body: '{"bizTag":"x2","step":"ten"}' }, 400, 'BAD_REQUEST', /step/],
    ['create with unknown field', '/v1/biz', { method: 'POST', headers: admin, body: '{"bizTag":"x3","colour":"red"}' }, 400, 'BAD_REQUEST', /colour/],
    ['create with bad mode', '/v1/biz', { method: 'POST', headers: admin, body: '{"bizTag":"x4","mode":"magic"}' }, 400, 'BAD_REQUEST', /mode/],
    ['create with bad JSON', '/v1/biz', { method: 'POST', headers: admin, body: '{"bizTag":' }, 400, 'BAD_REQUEST', /JSON/],
    ['create with an array body', '/v1/biz', { method: 'POST', headers: admin, body: '[1]' }, 400, 'BAD_REQUEST', /object/],
    ['create an existing tag', '/v1/biz', { method: 'POST', headers: admin, body: '{"bizTag":"order"}' }, 409, 'BIZ_TAG_EXISTS', /order/],
    [
      'oversized body',
      '/v1/biz',
      { method: 'POST', headers: admin, body: JSON.stringify({ bizTag: 'x5', description: 'x'.repeat(200_000) }) },
      400,
      'BAD_REQUEST',
      /too large/,
    ],
    ['patch unknown tag', '/v1/biz/nope', { method: 'PATCH', headers: admin, body: '{"step":5}' }, 404, 'UNKNOWN_BIZ_TAG', /nope/],
    ['unknown route', '/v2/anything', undefined, 404, 'BAD_REQUEST', /no route .*see \/docs/],
    ['decode a formatted ID without its tag', '/v1/decode/3xYz9', undefined, 400, 'BAD_REQUEST', /add \?bizTag=/],
  ];

  it.each(bad.map(([name, path, init, status, code, message]) => ({ name, path, init, status, code, message })))(
    '$name → $status $code',
    async ({ path, init, status, code, message }) => {
      const response = await fetch(`${server.url}${path}`, init);
      expect(response.status).toBe(status);
      const body = (await response.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe(code);
      expect(body.error.message).toMatch(message);
      expect(JSON.stringify(body)).not.toMatch(/\s+at\s+\S+\s+\(/); // no stack traces
    },
  );

  it('refuses a Redis pool on a server without Redis instead of serving it from memory', async () => {
    for (const pool of ['redis-list', 'redis-counter']) {
      const response = await fetch(`${server.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify({ bizTag: `no-${pool}`, pool }) });
      expect(response.status).toBe(400);
      expect(((await response.json()) as { error: { message: string } }).error.message).toMatch(/needs Redis.*REDIS_URL/);
    }
    const patch = await fetch(`${server.url}/v1/biz/order`, { method: 'PATCH', headers: admin, body: '{"pool":"redis-list"}' });
    expect(patch.status).toBe(400);
  });

  it('manages tags over the admin API', async () => {
    const create = await fetch(`${server.url}/v1/biz`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ bizTag: 'invoice', step: 50, maxLimit: 120, fallback: 'error', description: 'invoices' }),
    });
    expect(create.status).toBe(201);
    expect(await create.json()).toMatchObject({ bizTag: 'invoice', mode: 'segment', step: 50, maxLimit: 120, fallback: 'error' });
    const list = (await (await fetch(`${server.url}/v1/biz`, { headers: admin })).json()) as { tags: Array<{ bizTag: string }> };
    expect(list.tags.map((t) => t.bizTag)).toContain('invoice');
    const patched = await fetch(`${server.url}/v1/biz/invoice`, { method: 'PATCH', headers: admin, body: JSON.stringify({ description: 'changed' }) });
    expect(await patched.json()).toMatchObject({ description: 'changed' });

    // max_limit 120: 120 IDs, then SEGMENT_EXHAUSTED, never a wrap.
    const got: string[] = [];
    for (let i = 0; i < 3; i++) got.push(...((await (await fetch(`${server.url}/v1/ids/invoice?count=40`)).json()) as IdsAnswer).ids);
    expectNoDuplicates(got);
    expect(got).toHaveLength(120);
    expect(Math.max(...got.map(Number))).toBe(120);
    const exhausted = await fetch(`${server.url}/v1/ids/invoice?count=1`);
    expect(exhausted.status).toBe(409);
    expect(((await exhausted.json()) as { error: { code: string } }).error.code).toBe('SEGMENT_EXHAUSTED');

    const deleted = await fetch(`${server.url}/v1/biz/invoice`, { method: 'DELETE', headers: admin });
    expect(deleted.status).toBe(204);
    expect((await fetch(`${server.url}/v1/ids/invoice`)).status).toBe(404);
  });

  it('refuses a request larger than what remains under maxLimit without consuming it', async () => {
    const create = await fetch(`${server.url}/v1/biz`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ bizTag: 'invite', maxLimit: 5, fallback: 'error' }),
    });
    expect(create.status).toBe(201);
    const tooMany = await fetch(`${server.url}/v1/ids/invite?count=7`);
    expect(tooMany.status).toBe(409);
    const { error } = (await tooMany.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('SEGMENT_EXHAUSTED');
    expect(error.message).toMatch(/only 5 IDs left.*ask for at most 5/);
    const rest = (await (await fetch(`${server.url}/v1/ids/invite?count=5`)).json()) as IdsAnswer;
    expect(rest.ids.map(Number).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5]);
  });

  it('applies a changed step from the next segment, without skipping the buffered IDs', async () => {
    await fetch(`${server.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify({ bizTag: 'restep', step: 100 }) });
    const before = (await (await fetch(`${server.url}/v1/ids/restep?count=54`)).json()) as IdsAnswer;
    expect(before.ids.at(-1)).toBe('54');
    const patched = await fetch(`${server.url}/v1/biz/restep`, { method: 'PATCH', headers: admin, body: '{"step":1000}' });
    expect(patched.status).toBe(200);
    const after = (await (await fetch(`${server.url}/v1/ids/restep?count=1`)).json()) as IdsAnswer;
    expect(after.ids).toEqual(['55']);
  });

  it('answers a wrong method with 405 and Allow, in the error envelope', async () => {
    const response = await fetch(`${server.url}/v1/ids/demo`, { method: 'POST' });
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toMatch(/GET/);
    expect(((await response.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringMatching(/POST is not allowed.*use GET/),
    });
    expect((await fetch(`${server.url}/v1/nothing-here`)).status).toBe(404);
  });

  it('exposes health, readiness and Prometheus metrics', async () => {
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${server.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ready' });
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toMatch(/idmint_ids_issued_total\{biz_tag="order",source="pool"\} \d+/);
    expect(metrics).toMatch(/idmint_segment_allocation_seconds_bucket/);
    expect(metrics).toMatch(/idmint_errors_total\{code="UNKNOWN_BIZ_TAG"\}/);
  });
});
