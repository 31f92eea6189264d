import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { createLogger, type Logger } from '../../../src/log.js';

/** A server address from the environment the global setup fills in. */
export function env(name: 'ZK_CONNECT' | 'REDIS_URL' | 'DATABASE_URL'): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run through vitest (test/setup/global-infra.ts) or source .infra/env`);
  return v;
}

export const uniq = (prefix: string): string => `${prefix}${randomBytes(5).toString('hex')}`;

export const tempDir = (): string => mkdtempSync(join(tmpdir(), 'idmint-wid-'));

/** A loopback port nobody listens on: "the server is down", without stopping a shared one. */
export async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

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

/** Polls `check` until it returns true, failing after `attempts` tries. */
export async function eventually(check: () => boolean | Promise<boolean>, attempts = 200, everyMs = 50): Promise<void> {
  for (let i = 0; i < attempts; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error('condition not met');
}
