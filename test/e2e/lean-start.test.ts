import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { spawnServer } from '../support/spawn.js';

// A process loads the clients of the servers it is configured for, and no others: the embedded
// default and a Postgres-only api start without KafkaJS, BullMQ, ioredis, the BullMQ dashboard or
// the ZooKeeper client (about half a second of start-up and 55 MB of memory on this machine).
const RECORDER = pathToFileURL(new URL('../support/imports/record.mjs', import.meta.url).pathname).href;
const SERVER_CLIENTS = ['kafkajs', 'bullmq', 'ioredis', '@bull-board/api', '@bull-board/fastify', 'node-zookeeper-client'];

async function packagesLoaded(env: Record<string, string>, route: string): Promise<Set<string>> {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-lean-'));
  const file = join(dir, 'imports.txt');
  const server = await spawnServer({ IDMINT_DATA_DIR: dir, NODE_OPTIONS: `--import ${RECORDER}`, IDMINT_TEST_IMPORTS_FILE: file, ...env });
  try {
    expect((await fetch(`${server.url}${route}`)).status).toBe(200);
    return new Set(readFileSync(file, 'utf8').split('\n').filter(Boolean));
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('a lean start: only the clients a process is configured for are loaded', () => {
  it('the embedded default loads PGlite and none of the server clients', async () => {
    const loaded = await packagesLoaded({}, '/v1/ids/demo');
    expect(loaded).toContain('@electric-sql/pglite');
    expect(loaded).toContain('fastify');
    for (const name of [...SERVER_CLIENTS, 'pg']) expect(loaded, name).not.toContain(name);
  });

  it('an api on Postgres loads pg, and neither PGlite nor the clients of servers it was not given', async () => {
    const { DATABASE_URL } = process.env;
    expect(DATABASE_URL, 'the global setup names the test Postgres').toBeTruthy();
    const loaded = await packagesLoaded({ DATABASE_URL: DATABASE_URL!, IDMINT_PG_SCHEMA: 'lean_start', IDMINT_ROLES: 'api' }, '/api/snowflake/get/lean');
    expect(loaded).toContain('pg');
    for (const name of [...SERVER_CLIENTS, '@electric-sql/pglite']) expect(loaded, name).not.toContain(name);
  });

  it('a process given Redis loads ioredis and BullMQ (the recorder sees them)', async () => {
    const { REDIS_URL } = process.env;
    expect(REDIS_URL).toBeTruthy();
    const loaded = await packagesLoaded(
      { REDIS_URL: REDIS_URL!, IDMINT_POOL_KEY_PREFIX: `lean${process.pid}:`, IDMINT_REFILL_QUEUE: `lean-${process.pid}` },
      '/v1/ids/demo',
    );
    for (const name of ['ioredis', 'bullmq', '@bull-board/api']) expect(loaded, name).toContain(name);
  });
});
