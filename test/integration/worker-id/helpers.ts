import { mkdtempSync } from 'node:fs';
import { createConnection, createServer, type Socket } from 'node:net';
import { uniqueName } from '../../support/names.js';
import { env } from '../../support/env.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../../src/app/log.js';
import { ZkClient } from '../../../src/worker-id/index.js';

export const tempDir = (): string => mkdtempSync(join(tmpdir(), 'idmint-wid-'));

/** A logger whose JSON lines land in `lines`, for asserting on warnings. */
export function capturingLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString('utf8').split('\n')) if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { logger: createLogger({ level: 'debug', destination }), lines };
}

/** Real time shifted by a settable offset: a clock that can be stepped back and still moves. */
export function steppedClock(offsetMs = 0): { offset: number; now(): number } {
  const c = { offset: offsetMs, now: () => Date.now() + c.offset };
  return c;
}

/** A TCP forwarder to `target` on `port`, started late: "the server came back". */
export async function startProxy(port: number, target: string): Promise<{ close(): Promise<void> }> {
  const [host, targetPort] = target.split(',')[0]!.split(':') as [string, string];
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = createConnection(Number(targetPort), host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => sockets.delete(s));
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * Ends the session of a client that reaches ZooKeeper through `proxy` (on `port`), without a race:
 * the proxy is cut so the client cannot reconnect, a second client joins the session and closes it
 * (until joining it fails: the session is gone), then the proxy opens again and the client hears
 * SESSION_EXPIRED. (Joining and closing the session while the client can reconnect races its
 * reconnect, which a busy machine can lose for long.) Resolves with the reopened proxy, once the client emitted 'expired'.
 */
export async function expireSessionBehindProxy(
  zk: ZkClient,
  proxy: { close(): Promise<void> },
  port: number,
  target: string,
): Promise<{ close(): Promise<void> }> {
  const session = zk.session;
  const expired = new Promise<void>((resolve) => zk.once('expired', () => resolve()));
  await proxy.close();
  for (const giveUpAt = Date.now() + 30_000; ;) {
    try {
      const thief = await ZkClient.connect({ connect: target, session, connectTimeoutMs: 2000 });
      thief.close();
      await new Promise((r) => setTimeout(r, 200));
    } catch {
      break; // joining failed: the session is gone
    }
    if (Date.now() > giveUpAt) throw new Error('the session could not be closed');
  }
  const reopened = await startProxy(port, target);
  const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the client did not hear that its session expired')), 30_000).unref());
  await Promise.race([expired, timeout]);
  return reopened;
}

/** Removes a worker-id root: Leaf's layout, the records and the leases (live leases too: they are tests'). */
export async function removeRoot(zk: ZkClient, root: string): Promise<void> {
  for (const dir of ['forever', 'workers', 'leases']) {
    for (const child of await zk.getChildren(`${root}/${dir}`).catch(() => [])) await zk.remove(`${root}/${dir}/${child}`).catch(() => undefined);
    await zk.remove(`${root}/${dir}`).catch(() => undefined);
  }
  await zk.remove(root).catch(() => undefined);
}

/** Unique ZooKeeper roots for a test file, removed (with their worker nodes) by `removeAll()` in afterAll. */
export function zkRoots(): { next(): string; removeAll(): Promise<void> } {
  const roots: string[] = [];
  return {
    next() {
      const root = `/${uniqueName('idmint-test-', '')}`;
      roots.push(root);
      return root;
    },
    async removeAll() {
      const zk = await ZkClient.connect({ connect: env('ZK_CONNECT') });
      for (const root of roots) {
        await removeRoot(zk, root);
      }
      zk.close();
    },
  };
}
