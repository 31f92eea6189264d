import { createServer, createConnection, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createPgDatabase, type Database } from '../../../src/store/index.js';
import { env } from '../../support/env.js';
import { freePort } from '../../support/ports.js';
import { until } from '../../support/poll.js';

/**
 * A TCP proxy to Postgres that can hang: connections accepted, nothing forwarded or answered (a
 * frozen server, a network partition that drops packets). Postgres itself cannot be SIGSTOPped
 * here (many processes), and a stopped one refuses at once; a hang is what makes callers wait.
 */
async function hangingProxy(target: URL): Promise<{ port: number; hang(): void; heal(): void; close(): Promise<void> }> {
  let hung = false;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.on('error', () => undefined);
    client.on('close', () => sockets.delete(client));
    if (hung) return; // accepted, never answered
    const upstream = createConnection(Number(target.port), target.hostname);
    sockets.add(upstream);
    upstream.on('error', () => undefined);
    upstream.on('close', () => sockets.delete(upstream));
    client.pipe(upstream).pipe(client);
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port,
    hang: () => {
      hung = true;
      for (const s of sockets) s.destroy(); // the open connections die with the "server"
    },
    heal: () => (hung = false),
    close: () => new Promise<void>((resolve) => (server.close(() => resolve()), sockets.forEach((s) => s.destroy()))),
  };
}

describe('the Postgres circuit', () => {
  const closers: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  it('a hung Postgres: the first query waits for its connection timeout, later ones fail at once with NOT_READY until a probe finds it back', async () => {
    const target = new URL(env('DATABASE_URL'));
    const proxy = await hangingProxy(target);
    closers.push(() => proxy.close());
    const url = new URL(target);
    url.host = `127.0.0.1:${proxy.port}`;
    const db: Database = createPgDatabase({ connectionString: url.toString(), connectionTimeoutMillis: 1500, probeEveryMs: 200 });
    closers.push(() => db.close());
    expect((await db.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one).toBe(1);

    proxy.hang();
    const first = await db.query('SELECT 1').catch((e: unknown) => e);
    expect(first).toMatchObject({ code: 'NOT_READY' });
    // Known down: 50 callers in a row are refused without a connection attempt each.
    const refused = await Promise.all(Array.from({ length: 50 }, () => db.query('SELECT 1').catch((e: unknown) => e)));
    for (const err of refused) {
      expect(err).toMatchObject({ code: 'NOT_READY', details: { retryAfterMs: 200 } });
      expect((err as Error).message).toMatch(/Postgres \(.*\) is unreachable \(for \d+ s\); not waiting for it/);
    }
    // A SQL error is an answer: it neither opens the circuit nor is mistaken for an outage.
    proxy.heal();
    await until(
      'a probe to find Postgres back',
      async () =>
        await db.query('SELECT 1').then(
          () => true,
          () => false,
        ),
    );
    await expect(db.query('SELECT * FROM no_such_table_for_the_circuit')).rejects.toMatchObject({ code: '42P01' });
    expect((await db.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one).toBe(1);
  });
});
