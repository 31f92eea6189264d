import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnServer, untilReady, type SpawnedServer } from '../support/spawn.js';
import { startPrivateServer, type PrivateServer } from '../support/servers.js';
import { sleep, until } from '../support/poll.js';
import { expectNoDuplicates } from '../support/unique.js';
import { expectQuietOutage, logLines, unrecovered, type LogLine } from '../support/log-volume.js';

// A Postgres outage under load, as an orchestrator and an on-call engineer see it: IDs keep
// flowing from the Redis pools, /readyz stays 200 `degraded` on every API (it was 503, which
// pulled every instance out of rotation at once), and each component logs the outage once and
// its end once, instead of a warning per request or per probe.
const TOKEN = 'pg-outage-admin';
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

describe('Postgres down under load (two API processes, Redis pools)', () => {
  let redis: PrivateServer;
  let postgres: PrivateServer;
  const servers: SpawnedServer[] = [];
  const dirs: string[] = [];

  beforeAll(async () => {
    [redis, postgres] = await Promise.all([startPrivateServer('redis'), startPrivateServer('postgres')]);
    for (let i = 0; i < 2; i++) {
      const dir = mkdtempSync(join(tmpdir(), 'idmint-pg-outage-'));
      dirs.push(dir);
      servers.push(
        await spawnServer({
          IDMINT_DATA_DIR: dir,
          IDMINT_ADMIN_TOKEN: TOKEN,
          REDIS_URL: redis.url,
          DATABASE_URL: postgres.url,
          IDMINT_POOL_MIN_DEPTH: '200000',
          IDMINT_REFILL_EVERY_MS: '1000',
        }),
      );
    }
    const response = await fetch(`${servers[0]!.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify({ bizTag: 'orders', step: 1000 }) });
    expect(response.status, await response.clone().text()).toBe(201);
    // The pool is filled before the outage (that is what pools are for).
    await until(
      'the first server to serve from the pool',
      async () => ((await (await fetch(`${servers[0]!.url}/v1/ids/orders?count=10`)).json()) as { source?: string }).source === 'pool',
    );
  });

  afterAll(async () => {
    for (const server of servers) await server.stop('SIGKILL');
    await Promise.all([redis?.close(), postgres?.close()]);
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('keeps serving from the pools with /readyz 200 degraded, and logs the outage once and its end once per component', async () => {
    const ids: string[] = [];
    const sources = new Map<string, number>();
    const take = async (server: SpawnedServer): Promise<void> => {
      const response = await fetch(`${server.url}/v1/ids/orders?count=50`);
      const body = (await response.json()) as { ids?: string[]; source?: string; error?: { code: string } };
      const key = response.status === 200 ? `200 ${body.source}` : `${response.status} ${body.error?.code}`;
      sources.set(key, (sources.get(key) ?? 0) + 1);
      ids.push(...(body.ids ?? []));
    };
    const marks = servers.map((s) => s.output().length);

    const outageFrom = Date.now();
    await postgres.kill();
    const readiness: string[] = [];
    // The outage lasts a while, under load: time must pass here.
    const outageUntil = Date.now() + 8000;
    while (Date.now() < outageUntil) {
      for (const server of servers) {
        await take(server);
        const probe = await fetch(`${server.url}/readyz`);
        const report = (await probe.json()) as { status: string };
        readiness.push(`${probe.status} ${report.status}`);
      }
      await sleep(50);
    }
    expect(sources.get('200 pool') ?? 0).toBeGreaterThan(50);
    // Every probe during the outage: still in rotation, and honest about the missing server.
    expect(new Set(readiness.slice(4))).toEqual(new Set(['200 degraded']));

    await postgres.start();
    const startedAt = Date.now();
    for (const server of servers) await untilReady(server.url, { output: server.output });
    const backAt = Date.now();
    console.log(`Postgres back: every process ready ${backAt - startedAt} ms after it answered`);
    for (let i = 0; i < 20; i++) for (const server of servers) await take(server);
    expectNoDuplicates(ids);

    // The log of the outage, per process: no component repeats a warning per request or probe,
    // and each one that warned says when it was over.
    for (const [i, server] of servers.entries()) {
      const linesOf = (): LogLine[] => logLines(server.output(), marks[i]);
      await until('every component that warned to log its recovery', () => unrecovered(linesOf()).length === 0, {
        timeoutMs: 15_000,
        detail: () => `not recovered: ${unrecovered(linesOf()).join(', ')}`,
      });
      const lines = linesOf();
      const warnings = lines.filter((l) => l.level >= 40);
      const perMessage = new Map<string, number>();
      const key = (l: LogLine): string => `${l.component} ${l.msg}`;
      for (const l of warnings) perMessage.set(key(l), (perMessage.get(key(l)) ?? 0) + 1);
      for (const [message, count] of perMessage) expect(count, `${message}\n${server.output().slice(marks[i])}`).toBe(1);
      console.log(
        `Postgres down: process ${i} logged ${lines.filter((l) => l.level >= 30 && l.time <= backAt).length} lines in ${((backAt - outageFrom) / 1000).toFixed(1)} s`,
      );
      expectQuietOutage(lines, outageFrom, backAt);
      expect(
        lines.filter((l) => l.level >= 40 && /stack/.test(JSON.stringify(l))),
        'no stack for an expected outage',
      ).toEqual([]);
    }
  });

  it('a tag this process has never served still takes its fallback ladder while Postgres is down (the tag list is cached, not only the tags served)', async () => {
    const created = await fetch(`${servers[0]!.url}/v1/biz`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ bizTag: 'unseen', step: 1000, fallback: 'snowflake' }),
    });
    expect(created.status, await created.clone().text()).toBe(201);
    // A process started after the tag was created (or up to a minute before the outage) lists it.
    const dir = mkdtempSync(join(tmpdir(), 'idmint-pg-outage-'));
    dirs.push(dir);
    const late = await spawnServer({
      IDMINT_DATA_DIR: dir,
      IDMINT_ADMIN_TOKEN: TOKEN,
      REDIS_URL: redis.url,
      DATABASE_URL: postgres.url,
      IDMINT_REFILL_EVERY_MS: '1000',
    });
    servers.push(late);
    await untilReady(late.url, { output: late.output });
    await sleep(500); // the start-up listing runs behind readiness
    await postgres.kill();
    try {
      const response = await fetch(`${late.url}/v1/ids/unseen?count=5`);
      const body = (await response.json()) as { ids?: string[]; source?: string; error?: { code: string; message: string } };
      expect(response.status, JSON.stringify(body)).toBe(200);
      expect(body.ids).toHaveLength(5);
      expect(['pool', 'snowflake']).toContain(body.source);
    } finally {
      await postgres.start();
    }
  });
});
