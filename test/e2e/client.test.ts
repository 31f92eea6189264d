import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate as yieldToIo } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdmintClient, httpTransport, IdmintError } from '../../src/client/index.js';
import type { HttpTransport, IdmintClient } from '../../src/client/index.js';
import { freePort, spawnServer, type SpawnedServer } from '../support/spawn.js';
import { rejection } from '../support/assertions.js';
import { sleep, until } from '../support/poll.js';
import { expectNoDuplicates } from '../support/unique.js';

const TOKEN = 'e2e-client-token';
// The global setup exports the distributed servers; this file wants the embedded default.
const INFRA_VARS = ['DATABASE_URL', 'REDIS_URL', 'KAFKA_BROKERS', 'ZK_CONNECT'] as const;

async function createTag(url: string, body: Record<string, unknown>): Promise<void> {
  const response = await fetch(`${url}/v1/biz`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(response.status, await response.text()).toBe(201);
}

describe('client SDK against a spawned embedded server', () => {
  let dataDir: string;
  let server: SpawnedServer;
  const saved: Record<string, string | undefined> = {};

  beforeAll(async () => {
    for (const key of INFRA_VARS) {
      saved[key] = process.env[key];
      delete process.env[key];
    }
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-client-e2e-'));
    server = await spawnServer({ IDMINT_DATA_DIR: dataDir, IDMINT_ADMIN_TOKEN: TOKEN });
    await createTag(server.url, { bizTag: 'order', step: 2000 });
    await createTag(server.url, { bizTag: 'trace', mode: 'snowflake' });
    await createTag(server.url, { bizTag: 'shop', mode: 'sharded', shards: 4 });
  });

  afterAll(async () => {
    await server?.stop('SIGKILL');
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    for (const key of INFRA_VARS) if (saved[key] !== undefined) process.env[key] = saved[key];
  });

  it('64 callers on 3 clients, each with its own prefetch, take 200,000 IDs with zero duplicates and no errors', async () => {
    const transports = [0, 1, 2].map(() => httpTransport({ url: server.url }));
    const clients = transports.map((transport) => createIdmintClient({ transport, batchSize: 200 }));
    const ids: bigint[] = [];
    let left = 200_000;
    await Promise.all(
      Array.from({ length: 64 }, async (_, n) => {
        const client = clients[n % 3] as IdmintClient;
        for (let i = 0; left > 0; i++) {
          const want = Math.min(left, i % 2 ? 1 : 1 + ((n + i) % 64));
          left -= want;
          if (want === 1) ids.push(await client.next('order'));
          else ids.push(...(await client.nextMany('order', want)));
          if (i % 64 === 0) await yieldToIo();
        }
      }),
    );
    expect(ids).toHaveLength(200_000);
    expectNoDuplicates(ids);
    expect(ids).toHaveLength(200_000);
    expect(transports.reduce((n, t) => n + t.retried, 0)).toBe(0);
    // Every client fetched for itself, far fewer times than it handed out IDs.
    const fetches = clients.map((c) => c.stats()[0]?.fetches ?? 0);
    expect(fetches.every((f) => f > 0 && f < 1000)).toBe(true);
    await Promise.all(clients.map((c) => c.close()));
  });

  it('64 callers on 3 clients take 200,000+ IDs across a SIGKILL and restart with zero duplicates', async () => {
    const transports: HttpTransport[] = [];
    const clients: IdmintClient[] = [];
    for (let i = 0; i < 3; i++) {
      const transport = httpTransport({ url: server.url, retries: 5, backoffMs: 50, timeoutMs: 3000 });
      transports.push(transport);
      clients.push(createIdmintClient({ transport, batchSize: 500, maxBatchSize: 5000, timeoutMs: 15_000 }));
    }
    const ids: bigint[] = [];
    const errors = new Map<string, number>();
    let stop = false;
    const caller = async (n: number): Promise<void> => {
      const client = clients[n % 3] as IdmintClient;
      for (let i = 0; !stop; i++) {
        try {
          if (i % 3 === 0) ids.push(...(await client.nextMany('order', 1 + ((n * 7 + i) % 40))));
          else ids.push(await client.next('order'));
        } catch (err) {
          // The server is down for longer than the transport's retries: a clear error, then again.
          if (!(err instanceof IdmintError)) throw err;
          errors.set(err.code, (errors.get(err.code) ?? 0) + 1);
          await sleep(100);
        }
        // Callers do other work between IDs; this also lets the prefetch's I/O run.
        if (i % 64 === 0) await yieldToIo();
      }
    };
    const run = Promise.all(Array.from({ length: 64 }, (_, n) => caller(n)));
    await until('60,000 IDs before the crash', () => ids.length >= 60_000, { intervalMs: 10 });
    const port = new URL(server.url).port;
    await server.stop('SIGKILL');
    const beforeRestart = ids.length;
    server = await spawnServer({ IDMINT_DATA_DIR: dataDir, IDMINT_ADMIN_TOKEN: TOKEN, IDMINT_PORT: port });
    const atRestart = ids.length;
    await until('IDs after the restart', () => ids.length >= Math.max(200_000, atRestart + 50_000), { intervalMs: 10 });
    stop = true;
    await run;

    const retried = transports.reduce((n, t) => n + t.retried, 0);
    expect(ids.length).toBeGreaterThanOrEqual(200_000);
    expectNoDuplicates(ids);
    expect(ids.every((id) => id >= 1n && id <= BigInt(Number.MAX_SAFE_INTEGER))).toBe(true);
    // The kill really reached the callers: requests failed and were retried.
    expect(retried).toBeGreaterThan(0);
    expect([...errors.keys()].every((code) => code === 'NOT_READY' || code === 'TIMEOUT')).toBe(true);
    // Buffered IDs carried callers past the kill, and the restarted server served the rest.
    expect(atRestart).toBeGreaterThanOrEqual(beforeRestart);
    expect(ids.length - atRestart).toBeGreaterThanOrEqual(50_000);
    const stats = clients.flatMap((c) => c.stats());
    console.info(
      `client e2e: ${ids.length} IDs, ${atRestart} before the restart, ${retried} retried requests, caller errors ${JSON.stringify(Object.fromEntries(errors))}, batch sizes ${stats.map((s) => s.batchSize).join('/')}`,
    );
    // The batch grew from 500 under this load.
    expect(Math.max(...stats.map((s) => s.batchSize))).toBeGreaterThan(500);
    await Promise.all(clients.map((c) => c.close()));
  });

  it('segment tags travel as blocks: a synchronous take hands out 1,000,000 numbers to 16 callers with zero duplicates', async () => {
    const client = createIdmintClient({ url: server.url, batchSize: 10_000, maxBatchSize: 1_000_000 });
    const order = client.tag('order');
    const seen = new Set<number>();
    let taken = 0;
    const caller = async (): Promise<void> => {
      while (taken < 1_000_000) {
        const id = order.tryNextNumber() ?? (await order.nextNumber());
        seen.add(id);
        taken++;
        if (taken % 1000 === 0) await yieldToIo();
      }
    };
    await Promise.all(Array.from({ length: 16 }, caller));
    expect(seen.size).toBe(taken);
    // Blocks, not lists: a handful of fetches for a million IDs.
    const stats = client.stats().find((s) => s.bizTag === 'order')!;
    expect(stats.fetches).toBeLessThan(100);
    // A snowflake tag has no blocks: the SDK falls back to lists; as a number it is refused.
    const trace = client.tag('trace');
    expect(typeof (await trace.next())).toBe('bigint');
    expect(trace.tryNext()).toBeTypeOf('bigint');
    expect(() => trace.tryNextNumber()).toThrow(/exceeds 2\^53-1/);
    await client.close();
  });

  it('turns an unknown tag into UNKNOWN_BIZ_TAG without retrying it', async () => {
    const transport = httpTransport({ url: server.url });
    const client = createIdmintClient({ transport });
    const err = await rejection(client.next('no-such-tag'));
    expect(err.code).toBe('UNKNOWN_BIZ_TAG');
    expect(err.message).toMatch(/no-such-tag/);
    expect(transport.retried).toBe(0);
    await client.close();
  });

  it('nextNumber serves segment and sharded tags and refuses a snowflake tag with BAD_REQUEST', async () => {
    const client = createIdmintClient({ url: server.url });
    expect(Number.isSafeInteger(await client.nextNumber('order'))).toBe(true);
    const shop = await client.nextNumber('shop');
    expect(Number.isSafeInteger(shop)).toBe(true);
    const err = await rejection(client.nextNumber('trace'));
    expect(err.code).toBe('BAD_REQUEST');
    expect(err.message).toMatch(/next\(\)/);
    const trace = await client.next('trace');
    expect(trace >= 1n << 53n).toBe(true);
    const many = await client.nextMany('trace', 3000);
    const distinct = [trace, ...many];
    expectNoDuplicates(distinct);
    expect(distinct).toHaveLength(3001);
    await client.close();
  });

  it('rejects every call after close() with NOT_READY, and close() twice is fine', async () => {
    const client = createIdmintClient({ url: server.url, bizTags: ['order'] });
    expect(typeof (await client.next('order'))).toBe('bigint');
    await client.close();
    await client.close();
    for (const call of [client.next('order'), client.nextMany('order', 2), client.nextNumber('order')]) {
      expect((await rejection(call)).code).toBe('NOT_READY');
    }
  });

  it('sends the gatePass a server requires, and reports UNAUTHORIZED without it', async () => {
    const gatedDir = mkdtempSync(join(tmpdir(), 'idmint-client-gate-'));
    const gated = await spawnServer({ IDMINT_DATA_DIR: gatedDir, IDMINT_ADMIN_TOKEN: TOKEN, IDMINT_GATE_PASS: 'open-sesame' });
    try {
      const without = createIdmintClient({ url: gated.url });
      expect((await rejection(without.next('demo'))).code).toBe('UNAUTHORIZED');
      await without.close();
      const wrong = createIdmintClient({ transport: httpTransport({ url: gated.url, gatePass: 'nope' }) });
      expect((await rejection(wrong.next('demo'))).message).toMatch(/wrong gatePass/);
      await wrong.close();
      const right = createIdmintClient({ transport: httpTransport({ url: gated.url, gatePass: 'open-sesame' }) });
      expect(await right.nextMany('demo', 3)).toHaveLength(3);
      await right.close();
      // The gate pass is a secret: the start-up hint says where it goes, not what it is.
      expect(gated.output()).toContain('gatePass=<IDMINT_GATE_PASS>');
      expect(gated.output()).not.toContain('open-sesame');
    } finally {
      await gated.stop('SIGKILL');
      rmSync(gatedDir, { recursive: true, force: true });
    }
  });

  it('gives up with NOT_READY once its retries are exhausted against a dead port', async () => {
    const transport = httpTransport({ url: `http://127.0.0.1:${await freePort()}`, retries: 2, backoffMs: 10 });
    const client = createIdmintClient({ transport });
    const err = await rejection(client.next('order'));
    expect(err.code).toBe('NOT_READY');
    expect(err.message).toMatch(/cannot reach idmint/);
    expect(transport.retried).toBe(2);
    await client.close();
  });
});
