import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, until } from '../support/poll.js';
import { startRedisSentinels, type RedisSentinelSet } from '../support/redis-sentinel.js';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';
import { freshStore, type TestStore } from '../support/store.js';
import { expectNoDuplicates } from '../support/unique.js';

const TOKEN = 'sentinel-faults-token';

// Redis under Sentinel (a master, two replicas, three sentinels), the faults of a replicated
// Redis under load on the pools: the master hung (SIGSTOP) past the sentinels' down-after time,
// a replica promoted, the old master resumed as a stale master still holding its pools; a replica
// killed; the master SIGKILLed. Every ID is collected: zero duplicates, no failed request, and the
// pools serve again after each promotion (the time is printed).
describe('Redis Sentinel faults under load: a stale master, a lost replica, a killed master', () => {
  let set: RedisSentinelSet;
  let st: TestStore;
  let server: SpawnedServer;
  let dataDir: string;

  beforeAll(async () => {
    set = await startRedisSentinels('idmint-faults', 2);
    st = await freshStore('sentfault');
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-sentinel-faults-'));
    server = await spawnServer({
      ...set.env,
      DATABASE_URL: st.url,
      IDMINT_DATA_DIR: dataDir,
      IDMINT_ADMIN_TOKEN: TOKEN,
      IDMINT_REFILL_EVERY_MS: '1000',
      IDMINT_POOL_MIN_DEPTH: '2000',
      LOG_LEVEL: 'info',
    });
  }, 180_000);

  afterAll(async () => {
    await server?.stop('SIGTERM');
    await set?.close();
    await st?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }, 60_000);

  it('serves through each fault with every ID unique, and the pools serve again after each promotion', async () => {
    const created = await fetch(`${server.url}/v1/biz`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ bizTag: 'sentfault', step: 500, fallback: 'segment' }),
    });
    expect(created.status).toBe(201);
    const ids: string[] = [];
    const errors: string[] = [];
    const fromPool: number[] = [];
    let running = true;
    const client = async (): Promise<void> => {
      while (running) {
        const response = await fetch(`${server.url}/v1/ids/sentfault?count=${1 + Math.floor(Math.random() * 50)}`);
        const body = (await response.json()) as { ids?: string[]; source?: string };
        if (!response.ok || !body.ids) {
          errors.push(`${response.status} ${JSON.stringify(body)}`);
          await sleep(20);
          continue;
        }
        ids.push(...body.ids);
        if (body.source === 'pool') fromPool.push(Date.now());
      }
    };
    const clients = Promise.all(Array.from({ length: 8 }, () => client()));
    const detail = (): string =>
      `${ids.length} IDs, ${fromPool.length} pool replies; errors ${errors.length}: ${errors.slice(-3).join(' | ')}; the server's last output:\n${server.output().slice(-3000)}`;
    const poolBackAfter = async (t: number, what: string, timeoutMs = 120_000): Promise<number> => {
      await until(`the pool serving again ${what}`, () => fromPool.filter((s) => s > t).length > 200, { timeoutMs, detail });
      return fromPool.find((s) => s > t)! - t;
    };
    const report: string[] = [];
    try {
      await until('IDs from the pool', () => fromPool.length > 200 && ids.length > 20_000, { timeoutMs: 60_000, detail });

      // 1. The master hung past down-after: a replica is promoted while the old master still holds
      //    its pools and its clients' sockets. The pools serve from the new master while the old
      //    one still hangs; resumed, it is a stale master until the sentinels demote it.
      const paused = await set.pauseMaster();
      const promotedAt = Date.now();
      let back1: number;
      try {
        back1 = await poolBackAfter(promotedAt, 'while the old master still hangs', 20_000);
      } finally {
        paused.resume();
      }
      await until('the old master demoted to a replica', async () => (await set.roleOf(paused.from)) === 'slave', { timeoutMs: 60_000, detail });
      report.push(`hung master ${paused.from} -> ${paused.to}: pool back ${back1} ms after the promotion`);
      const mark1 = ids.length;
      await until('IDs after the stale master was demoted', () => ids.length > mark1 + 20_000, { timeoutMs: 60_000, detail });

      // 2. A replica killed: nothing for the pools to notice. (One fault at a time: each waits
      //    until a replica the sentinels could promote is in sync again.)
      await set.untilPromotable();
      const lostReplica = await set.killReplica();
      const mark2 = ids.length;
      const replicaKilledAt = Date.now();
      await until('IDs from the pool with a replica lost', () => ids.length > mark2 + 20_000 && fromPool.filter((s) => s > replicaKilledAt).length > 200, {
        timeoutMs: 60_000,
        detail,
      });
      report.push(`replica ${lostReplica} killed`);

      // 3. The master SIGKILLed: the last replica is promoted.
      await set.untilPromotable();
      const killed = await set.killMaster();
      const killPromotedAt = Date.now();
      const back3 = await poolBackAfter(killPromotedAt, 'after the killed master was replaced');
      report.push(`killed master ${killed.from} -> ${killed.to}: pool back ${back3} ms after the promotion`);
      const mark3 = ids.length;
      await until('IDs after the second promotion', () => ids.length > mark3 + 20_000, { timeoutMs: 60_000, detail });
    } finally {
      running = false;
      await clients;
    }
    console.info(`redis sentinel faults: ${ids.length} IDs, ${errors.length} errors; ${report.join('; ')}`);
    // The promoted replicas held copies of pools the old master had served from: the fence dropped them.
    expect(server.output()).toMatch(/dropped a (stale )?pool/);
    expect(errors, detail()).toEqual([]);
    expectNoDuplicates(ids, 'pool IDs through Sentinel failovers');
  }, 600_000);
});
