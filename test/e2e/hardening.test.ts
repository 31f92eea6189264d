import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnServer, type SpawnedServer } from '../helpers/spawn-server.js';

// Regression tests for the adversarial probe's findings (issue "Hardening"), on a real embedded
// server with small limits so the mechanisms show quickly.
const TOKEN = 'hardening-admin-token';
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

/** A raw socket that sends `head` and then nothing, or a byte every `trickleMs`. Resolves when the server closes it. */
function hostile(url: string, head: string, trickleMs?: number): { socket: Socket; closed: Promise<void> } {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  socket.on('error', () => undefined);
  socket.resume(); // read what the server sends (its 408), so its close is seen
  socket.on('connect', () => socket.write(head));
  let timer: NodeJS.Timeout | undefined;
  if (trickleMs) timer = setInterval(() => socket.writable && socket.write(' '), trickleMs);
  const closed = new Promise<void>((resolve) =>
    socket.on('close', () => {
      clearInterval(timer);
      resolve();
    }),
  );
  return { socket, closed };
}

async function eventually<T>(probe: () => Promise<T>, ok: (v: T) => boolean, what: string, attempts = 200): Promise<T> {
  let last: unknown;
  for (let i = 0; i < attempts; i++) {
    try {
      const v = await probe();
      if (ok(v)) return v;
      last = v;
    } catch (err) {
      last = err;
    }
    await sleep(100);
  }
  throw new Error(`${what}: last ${String(last)}`);
}

describe('hardening (real embedded server, small limits)', () => {
  let dataDir: string;
  let server: SpawnedServer;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-harden-'));
    server = await spawnServer({
      IDMINT_DATA_DIR: dataDir,
      IDMINT_ADMIN_TOKEN: TOKEN,
      IDMINT_HTTP_REQUEST_TIMEOUT_MS: '1000',
      IDMINT_HTTP_KEEP_ALIVE_MS: '500',
      IDMINT_HTTP_MAX_CONNECTIONS: '30',
    });
  });

  afterAll(async () => {
    await server?.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('#1 closes a body trickled a byte at a time, and a Content-Length larger than the body, at the request timeout', async () => {
    const trickle = hostile(server.url, 'POST /v1/biz HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n', 200);
    const short = hostile(server.url, 'POST /v1/biz HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":1}');
    const silent = hostile(server.url, '');
    await Promise.all([trickle.closed, short.closed, silent.closed]);
  });

  it('#1 many hostile sockets beyond the connection cap leave /healthz answering', async () => {
    const sockets = Array.from({ length: 300 }, () => hostile(server.url, 'POST /v1/biz HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n', 300));
    const health = await eventually(() => fetch(`${server.url}/healthz`).then((r) => r.status), (s) => s === 200, '/healthz under 300 hostile sockets');
    expect(health).toBe(200);
    await Promise.all(sockets.map((s) => s.closed));
    expect((await fetch(`${server.url}/v1/ids/demo`)).status).toBe(200);
  });
});
