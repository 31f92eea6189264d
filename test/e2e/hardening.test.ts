import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { untilValue } from '../support/poll.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';

// Regression tests for the adversarial probe's findings (issue "Hardening"), on a real embedded
// server with small limits so the mechanisms show quickly.
const TOKEN = 'hardening-admin-token';
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const REQUEST_TIMEOUT_MS = 1000;
const KEEP_ALIVE_MS = 500;
/**
 * Past this a socket's close is not the server's limit at work: a multiple of the limits, not a
 * speed (node checks requests once a second; a loaded machine is late, never early).
 */
const CLOSE_BOUND_MS = 10 * (REQUEST_TIMEOUT_MS + KEEP_ALIVE_MS);

/** How a hostile socket ended: after how long (from its connect), and what the server sent it. */
interface Closed {
  afterMs: number;
  received: string;
}

/** A raw socket that sends `head` and then nothing, or a byte every `trickleMs`. `closed` resolves when the server closes it. */
function hostile(url: string, head: string, trickleMs?: number): { socket: Socket; closed: Promise<Closed> } {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  let connectedAt = Date.now();
  let received = '';
  socket.on('error', () => undefined);
  socket.on('data', (d: Buffer) => (received += d.toString())); // read what the server sends (its 408), so its close is seen
  socket.on('connect', () => {
    connectedAt = Date.now();
    socket.write(head);
  });
  let timer: NodeJS.Timeout | undefined;
  if (trickleMs) timer = setInterval(() => socket.writable && socket.write(' '), trickleMs);
  const closed = new Promise<Closed>((resolve) =>
    socket.on('close', () => {
      clearInterval(timer);
      resolve({ afterMs: Date.now() - connectedAt, received });
    }),
  );
  return { socket, closed };
}

/** `closed`, or a failure naming `what` once `ms` have passed: a socket the server never closes fails here, not at the test's timeout. */
async function closedWithin(what: string, closed: Promise<Closed>, ms: number): Promise<Closed> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: still open ${ms} ms after it connected`)), ms)));
  try {
    return await Promise.race([closed, late]);
  } finally {
    clearTimeout(timer);
  }
}

describe('hardening (real embedded server, small limits)', () => {
  let dataDir: string;
  let server: SpawnedServer;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-harden-'));
    server = await spawnServer({
      IDMINT_DATA_DIR: dataDir,
      IDMINT_ADMIN_TOKEN: TOKEN,
      IDMINT_HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
      IDMINT_HTTP_KEEP_ALIVE_MS: String(KEEP_ALIVE_MS),
      IDMINT_HTTP_MAX_CONNECTIONS: '30',
    });
  });

  afterAll(async () => {
    await server?.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('closes a body trickled a byte at a time, and a Content-Length larger than the body, at the request timeout', async () => {
    // With the admin token, so the route waits for the body (without it, a 401 goes out at once).
    const head = (length: number): string =>
      `POST /v1/biz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
    const trickle = hostile(server.url, head(60000), 200);
    const short = hostile(server.url, `${head(100)}{"a":1}`);
    const silent = hostile(server.url, '');
    const [trickled, shortBody, quiet] = await Promise.all([
      closedWithin('the trickled body', trickle.closed, CLOSE_BOUND_MS),
      closedWithin('the short body', short.closed, CLOSE_BOUND_MS),
      closedWithin('the silent socket', silent.closed, CLOSE_BOUND_MS),
    ]);
    // The request timeout closed each, with a 408 in the error envelope, and not before it ran out.
    // (The short body was cut without an answer by the idle-socket timeout firing first: issue 42.)
    for (const ended of [trickled, shortBody, quiet]) {
      expect(ended.received).toMatch(/^HTTP\/1\.1 408 /);
      expect(ended.received).toContain('{"error":{"code":"TIMEOUT"');
      expect(ended.afterMs).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS);
    }
  });

  it('many hostile sockets beyond the connection cap leave /healthz answering', async () => {
    const sockets = Array.from({ length: 300 }, () => hostile(server.url, 'POST /v1/biz HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n', 300));
    const health = await untilValue(
      '/healthz under 300 hostile sockets',
      () =>
        fetch(`${server.url}/healthz`).then(
          (r) => r.status,
          (err: unknown) => String(err),
        ),
      (s) => s === 200,
    );
    expect(health).toBe(200);
    await Promise.all(sockets.map((s) => s.closed));
    expect((await fetch(`${server.url}/v1/ids/demo`)).status).toBe(200);
  });

  it('router, parser and client errors come back in the error envelope', async () => {
    const envelope = async (response: Response, status: number): Promise<void> => {
      expect(response.status).toBe(status);
      const body = (await response.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toMatch(/^(BAD_REQUEST|TIMEOUT)$/);
    };
    await envelope(await fetch(`${server.url}/v1/ids/%`), 400);
    await envelope(await fetch(`${server.url}/v1/ids/${'a'.repeat(300)}`), 414);
    await envelope(await fetch(`${server.url}/v1/ids/demo`, { headers: { 'x-big': 'a'.repeat(20_000), 'x-big2': 'a'.repeat(20_000) } }), 431);
    const garbage = hostile(server.url, 'GARBAGE\r\n\r\n');
    let raw = '';
    garbage.socket.on('data', (d: Buffer) => (raw += d.toString()));
    await garbage.closed;
    expect(raw).toMatch(/^HTTP\/1.1 400/);
    expect(raw).toContain('{"error":{"code":"BAD_REQUEST","message":"malformed HTTP request"}}');
  });

  it('refuses maxLimit on snowflake and uid tags, and NUL in a description with 400', async () => {
    for (const mode of ['snowflake', 'uid']) {
      const response = await fetch(`${server.url}/v1/biz`, {
        method: 'POST',
        headers: admin,
        body: JSON.stringify({ bizTag: `lim-${mode}`, mode, maxLimit: 5, fallback: 'error' }),
      });
      expect(response.status).toBe(400);
      expect(((await response.json()) as { error: { message: string } }).error.message).toMatch(/maxLimit applies to segment and sharded tags/);
    }
    const nul = await fetch(`${server.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify({ bizTag: 'nul', description: 'a\u0000b' }) });
    expect(nul.status).toBe(400);
    expect(((await nul.json()) as { error: { code: string } }).error.code).toBe('BAD_REQUEST');
  });

  it('a sharded tag never hands out buffered sequences above a lowered maxLimit', async () => {
    expect(
      (
        await fetch(`${server.url}/v1/biz`, {
          method: 'POST',
          headers: admin,
          body: JSON.stringify({ bizTag: 'shardy', mode: 'sharded', shards: 1, step: 10, fallback: 'error' }),
        })
      ).status,
    ).toBe(201);
    const first = (await (await fetch(`${server.url}/v1/ids/shardy?count=3`)).json()) as { ids: string[] };
    expect(first.ids).toHaveLength(3);
    expect((await fetch(`${server.url}/v1/biz/shardy`, { method: 'PATCH', headers: admin, body: '{"maxLimit":4}' })).status).toBe(200);
    const next = await fetch(`${server.url}/v1/ids/shardy?count=1`);
    const body = (await next.json()) as { ids?: string[]; error?: { code: string } };
    if (next.ok) {
      const decoded = (await (await fetch(`${server.url}/v1/decode/${body.ids![0]}?bizTag=shardy`)).json()) as { sequence: number };
      expect(decoded.sequence).toBeLessThanOrEqual(4);
    } else expect(body.error?.code).toBe('SEGMENT_EXHAUSTED');
    const after = await fetch(`${server.url}/v1/ids/shardy?count=1`);
    expect(after.status).toBe(409);
  });

  it('admin auth is exact, and /v1/stats needs the token', async () => {
    const as = (authorization: string) => fetch(`${server.url}/v1/biz`, { headers: { authorization } }).then((r) => r.status);
    expect(await as(`Bearer ${TOKEN}`)).toBe(200);
    expect(await as(`Bearer ${TOKEN} extra`)).toBe(401);
    expect(await as(`Basic ${Buffer.from(TOKEN).toString('base64')}`)).toBe(401); // no colon: no password
    expect(await as(`Basic ${Buffer.from(`any:${TOKEN}`).toString('base64')}`)).toBe(200);
    expect((await fetch(`${server.url}/v1/stats`)).status).toBe(401);
    expect((await fetch(`${server.url}/v1/stats`, { headers: admin })).status).toBe(200);
  });
});
