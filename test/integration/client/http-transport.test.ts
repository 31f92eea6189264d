import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createIdmintClient, failoverTransport, httpTransport } from '../../../src/client/index.js';
import { rejection } from '../../support/assertions.js';
import { until } from '../../support/poll.js';

/**
 * The transport's handling of every answer shape, against a scripted HTTP server (the real
 * idmint server is covered in test/e2e/client.test.ts; these shapes are hard to provoke there).
 */

type Script = (req: IncomingMessage, res: ServerResponse) => void;
let server: Server | undefined;
const seen: string[] = [];

async function serve(...answers: Script[]): Promise<string> {
  seen.length = 0;
  server = createServer((req, res) => {
    seen.push(req.url ?? '');
    (answers.length > 1 ? (answers.shift() as Script) : (answers[0] as Script))(req, res);
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const json =
  (status: number, body: unknown): Script =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
const ids = (...values: string[]): Script => json(200, { bizTag: 'order', ids: values, source: 'pool' });
const error = (status: number, code: string, message: string): Script => json(status, { error: { code, message } });

afterEach(async () => {
  const s = server;
  server = undefined;
  if (!s) return;
  s.closeAllConnections();
  await new Promise((resolve) => s.close(resolve));
});

describe('httpTransport', () => {
  it('asks GET /v1/ids/:bizTag with count and gatePass, under a path prefix', async () => {
    const url = await serve(ids('1', '2'));
    const t = httpTransport({ url: `${url}/idmint`, gatePass: 'p&ss' });
    expect(await t.fetch('order', 2)).toEqual({ ids: ['1', '2'], source: 'pool' });
    expect(seen).toEqual(['/idmint/v1/ids/order?count=2&gatePass=p%26ss']);
    await t.close();
  });

  it('retries NOT_READY, TIMEOUT, POOL_EMPTY and 5xx answers with backoff, then succeeds', async () => {
    const url = await serve(
      error(503, 'NOT_READY', 'starting'),
      error(504, 'TIMEOUT', 'slow'),
      error(503, 'POOL_EMPTY', 'dry'),
      (_req, res) => res.writeHead(502).end('<html>bad gateway</html>'),
      ids('7'),
    );
    const t = httpTransport({ url, retries: 4, backoffMs: 1 });
    expect((await t.fetch('order', 1)).ids).toEqual(['7']);
    expect(t.retried).toBe(4);
    await t.close();
  });

  it('turns an error body back into the same code and message, without retrying a non-retriable one', async () => {
    for (const [status, code] of [
      [404, 'UNKNOWN_BIZ_TAG'],
      [400, 'BAD_REQUEST'],
      [401, 'UNAUTHORIZED'],
      [409, 'SEGMENT_EXHAUSTED'],
    ] as const) {
      const url = await serve(error(status, code, `server says ${code}`));
      const t = httpTransport({ url, backoffMs: 1 });
      const err = await rejection(t.fetch('order', 1));
      expect(err).toMatchObject({ code, message: `server says ${code}`, retriable: false });
      expect(seen).toHaveLength(1);
      await t.close();
      await new Promise((resolve) => server?.close(resolve));
    }
  });

  it('gives up after its retries with the last error', async () => {
    const url = await serve(error(503, 'NOT_READY', 'still starting'));
    const t = httpTransport({ url, retries: 2, backoffMs: 1 });
    expect(await rejection(t.fetch('order', 1))).toMatchObject({ code: 'NOT_READY', message: 'still starting' });
    expect(seen).toHaveLength(3);
    await t.close();
  });

  it('abandons an attempt after timeoutMs with TIMEOUT and retries it', async () => {
    let calls = 0;
    const url = await serve((_req, res) => {
      // The first request never gets an answer.
      if (calls++ > 0) ids('9')(_req, res);
    });
    const t = httpTransport({ url, timeoutMs: 100, retries: 1, backoffMs: 1 });
    expect((await t.fetch('order', 1)).ids).toEqual(['9']);
    expect(t.retried).toBe(1);
    const once = httpTransport({ url: url, timeoutMs: 100, retries: 0 });
    calls = 0;
    expect((await rejection(once.fetch('order', 1))).code).toBe('TIMEOUT');
    await t.close();
    await once.close();
  });

  it('answers a malformed success with an error, and close() aborts a request in flight', async () => {
    const url = await serve(json(200, { ids: 'nope' }), () => undefined);
    const t = httpTransport({ url, retries: 0 });
    expect((await rejection(t.fetch('order', 1))).message).toMatch(/without an ids array/);
    const pending = t.fetch('order', 1);
    await until('the request to reach the server', () => seen.length === 2);
    await t.close();
    expect(await rejection(pending)).toMatchObject({ code: 'NOT_READY', message: /closed/ });
    expect((await rejection(t.fetch('order', 1))).message).toMatch(/closed/);
  });

  it('close() ends a backoff in progress at once, with the closed error (issue 46)', async () => {
    const url = await serve(error(503, 'NOT_READY', 'starting'));
    // An hour's backoff: only close() can end the wait within the test's timeout.
    const t = httpTransport({ url, retries: 3, backoffMs: 3_600_000, maxBackoffMs: 3_600_000 });
    const pending = t.fetch('order', 1);
    await until('the first attempt to fail', () => t.retried === 1);
    await t.close();
    expect(await rejection(pending)).toMatchObject({ code: 'NOT_READY', message: /closed/, retriable: false });
    expect(seen).toHaveLength(1);
  });

  it('validates its options', () => {
    for (const options of [{ url: 'not a url' }, { url: 'ftp://x' }]) {
      expect(() => httpTransport(options)).toThrow(expect.objectContaining({ code: 'BAD_REQUEST', field: 'url' }));
    }
    // Checked by resolveOptions: a misconfiguration, never an HTTP 400.
    for (const options of [
      { url: 'http://x', retries: -1 },
      { url: 'http://x', timeoutMs: 0 },
    ]) {
      expect(() => httpTransport(options)).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    }
  });

  it('serves a client through retries: the caller sees IDs, not the failures', async () => {
    const url = await serve(error(503, 'NOT_READY', 'starting'), (req, res) => {
      const count = Number(new URL(req.url ?? '', 'http://x').searchParams.get('count'));
      ids(...Array.from({ length: count }, (_, i) => String(i + 1)))(req, res);
    });
    const client = createIdmintClient({ transport: httpTransport({ url, backoffMs: 1 }), batchSize: 5 });
    expect(await client.nextMany('order', 5)).toEqual([1n, 2n, 3n, 4n, 5n]);
    await client.close();
  });
});

describe('failoverTransport', () => {
  it('tries every server each round, rounds times, and throws the last retriable failure', async () => {
    const url = await serve(error(503, 'NOT_READY', 'starting'));
    const t = failoverTransport({ urls: [url, `${url}/b`], rounds: 2 });
    expect(await rejection(t.fetch('order', 1))).toMatchObject({ code: 'NOT_READY', message: 'starting' });
    // Round 1: both servers; round 2: both again (each cooling down, so all of them).
    expect(seen).toHaveLength(4);
    await t.close();
  });

  it("returns the first answer, and a caller's mistake at once without trying the next server", async () => {
    const url = await serve(error(503, 'NOT_READY', 'starting'), ids('5'), error(404, 'UNKNOWN_BIZ_TAG', 'no such tag'));
    const t = failoverTransport({ urls: [url, `${url}/b`] });
    expect((await t.fetch('order', 1)).ids).toEqual(['5']);
    expect(await rejection(t.fetch('nope', 1))).toMatchObject({ code: 'UNKNOWN_BIZ_TAG' });
    expect(seen).toHaveLength(3);
    await t.close();
  });

  it('close() ends the wait between rounds at once, and nothing is asked after it', async () => {
    const url = await serve(error(503, 'NOT_READY', 'starting'));
    const t = failoverTransport({ urls: [url], rounds: 100 });
    const pending = t.fetch('order', 1);
    await until('the first round to fail', () => seen.length >= 1);
    await t.close();
    expect(await rejection(pending)).toMatchObject({ code: 'NOT_READY', message: /closed/, retriable: false });
    const asked = seen.length;
    expect((await rejection(t.fetch('order', 1))).message).toMatch(/closed/);
    expect(seen).toHaveLength(asked);
  });
});
