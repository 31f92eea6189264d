import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafkaClient, type IdmintKafkaClient } from '../../src/client/kafka/rpc-client.js';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';
import { sleep, until } from '../support/poll.js';
import { expectDisjoint } from '../support/unique.js';
import { expectNoDuplicates } from '../support/unique.js';
import { TEST_VERIFY_KEY } from '../support/signing.js';

// Blocks end to end: GET /v1/blocks and Kafka "as":"blocks" beside GET /v1/ids, with zero
// duplicates across both while the server is SIGKILLed and restarted, every block inside a ledger
// segment, and the fallback ladder (a pool that is short is answered from Postgres, not Snowflake).
const TOKEN = 'blocks-admin-token';
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const run = Math.random().toString(36).slice(2, 10);

interface BlocksAnswer {
  bizTag: string;
  blocks: Array<{ start: string; end: string }>;
  source: string;
}

function need(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: the e2e global setup starts the local servers`);
  return value;
}

describe('blocks on the distributed topology (Postgres, Redis pools, Kafka)', () => {
  const schema = `blocks_${run}`;
  const requestTopic = `blocks.requests.${run}`;
  let db: pg.Client;
  let dataDir: string;
  let server: SpawnedServer;
  let client: IdmintKafkaClient;
  let env: Record<string, string>;

  beforeAll(async () => {
    db = new pg.Client({ connectionString: need('DATABASE_URL') });
    await db.connect();
    await db.query(`CREATE SCHEMA ${schema}`);
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-blocks-'));
    env = {
      DATABASE_URL: need('DATABASE_URL'),
      IDMINT_PG_SCHEMA: schema,
      REDIS_URL: need('REDIS_URL'),
      KAFKA_BROKERS: need('KAFKA_BROKERS'),
      IDMINT_DATA_DIR: dataDir,
      IDMINT_ADMIN_TOKEN: TOKEN,
      IDMINT_POOL_KEY_PREFIX: `blocks${run}:`,
      IDMINT_REFILL_QUEUE: `blocks-${run}`,
      IDMINT_KAFKA_REQUEST_TOPIC: requestTopic,
      IDMINT_KAFKA_RESPONDER_GROUP: `blocks.responders.${run}`,
      IDMINT_KAFKA_SESSION_TIMEOUT_MS: '6000',
    };
    server = await spawnServer(env);
    client = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, brokers: need('KAFKA_BROKERS'), requestTopic, clientId: `blocks-client-${run}` });
  });

  afterAll(async () => {
    await client?.close();
    await server?.stop('SIGKILL');
    await db?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await db?.end();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('a burst on a fresh tag with Redis pools and every server healthy gets no Snowflake IDs', async () => {
    expect(
      (await fetch(`${server.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify({ bizTag: 'burst', fallback: 'snowflake' }) })).status,
    ).toBe(201);
    const answers = await Promise.all(
      Array.from({ length: 16 }, () => fetch(`${server.url}/v1/ids/burst?count=500`).then((r) => r.json() as Promise<{ ids: string[]; source: string }>)),
    );
    expect(answers.filter((a) => a.source === 'snowflake')).toHaveLength(0);
    const ids = answers.flatMap((a) => a.ids);
    expectNoDuplicates(ids);
    expect(ids).toHaveLength(16 * 500);
  });

  it('blocks and lists mixed, over HTTP and Kafka, across a SIGKILL and restart: zero duplicates, every block inside a ledger segment', async () => {
    expect(
      (await fetch(`${server.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify({ bizTag: 'mixed', step: 5000, fallback: 'segment' }) }))
        .status,
    ).toBe(201);
    const ranges: Array<[number, number]> = [];
    const failures: string[] = [];
    let stop = false;
    const worker = async (kind: number): Promise<void> => {
      while (!stop) {
        try {
          if (kind % 3 === 0) {
            const body = (await (await fetch(`${server.url}/v1/blocks/mixed?count=${1 + Math.floor(Math.random() * 50_000)}`)).json()) as BlocksAnswer;
            for (const b of body.blocks) ranges.push([Number(b.start), Number(b.end)]);
          } else if (kind % 3 === 1) {
            const body = (await (await fetch(`${server.url}/v1/ids/mixed?count=${1 + Math.floor(Math.random() * 500)}`)).json()) as { ids: string[] };
            for (const id of body.ids) ranges.push([Number(id), Number(id)]);
          } else {
            const result = await client.getBlocks('mixed', 1 + Math.floor(Math.random() * 20_000), { timeoutMs: 10_000 });
            for (const b of result.blocks) ranges.push([b.start, b.end]);
          }
        } catch (err) {
          failures.push(String(err));
          await sleep(50);
        }
      }
    };
    const workers = Array.from({ length: 9 }, (_, i) => worker(i));
    const taken = () => ranges.reduce((n, [s, e]) => n + e - s + 1, 0);
    await until('IDs before the crash', () => taken() > 50_000);
    await server.stop('SIGKILL');
    const atCrash = taken();
    server = await spawnServer(env);
    await until('IDs after the restart', () => taken() > atCrash + 50_000);
    stop = true;
    await Promise.all(workers);

    const total = ranges.reduce((n, [s, e]) => n + e - s + 1, 0);
    expect(total).toBeGreaterThan(100_000);
    expectDisjoint(ranges.map(([start, end]) => ({ start, end })));
    const { rows } = await db.query<{ start_id: string; end_id: string }>(`SELECT start_id, end_id FROM ${schema}.idmint_ledger WHERE biz_tag = 'mixed'`);
    // Adjacent segments merge (a counter pool hands out across them): every ID inside the ledger.
    const ledger: Array<[number, number]> = [];
    for (const [ls, le] of rows.map((r) => [Number(r.start_id), Number(r.end_id)] as [number, number]).sort((a, b) => a[0] - b[0])) {
      const last = ledger[ledger.length - 1];
      if (last && last[1] + 1 === ls) last[1] = le;
      else ledger.push([ls, le]);
    }
    for (const [s, e] of ranges)
      expect(
        ledger.some(([ls, le]) => ls <= s && e <= le),
        `[${s}, ${e}] outside the ledger's segments`,
      ).toBe(true);
  });

  it('refuses blocks for a snowflake tag with a clear BAD_REQUEST; a count over IDMINT_MAX_BLOCK_COUNT too', async () => {
    expect(
      (await fetch(`${server.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify({ bizTag: 'flakes', mode: 'snowflake' }) })).status,
    ).toBe(201);
    const response = await fetch(`${server.url}/v1/blocks/flakes?count=10`);
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { message: string } }).error.message).toMatch(/blocks are for segment tags.*use GET \/v1\/ids/);
    expect((await fetch(`${server.url}/v1/blocks/mixed?count=10000001`)).status).toBe(400);
  });
});
