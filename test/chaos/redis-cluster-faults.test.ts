import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, until } from '../support/poll.js';
import { startRedisCluster, type RedisClusterSet } from '../support/redis-cluster.js';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';
import { freshStore, type TestStore } from '../support/store.js';
import { expectNoDuplicates } from '../support/unique.js';

const TOKEN = 'cluster-faults-token';
const auth = { authorization: `Bearer ${TOKEN}` };

// A six-node Redis Cluster (three primaries, a replica each) under load on both Redis pool kinds:
// the primary of one tag's slot hung (SIGSTOP) until its replica was promoted, then resumed (it
// comes back holding the pool it served from, until the cluster makes it a replica); then the
// primary of the other tag's slot SIGKILLed. The refill queue (BullMQ, hash-tagged prefix), the
// Lua take and push scripts, the demand and meta keys and the Redis worker-id provider all run
// on the Cluster: a CROSSSLOT anywhere would show as an error or in the log.
describe('Redis Cluster faults under load: a hung primary, a killed primary', () => {
  let cluster: RedisClusterSet;
  let st: TestStore;
  let server: SpawnedServer;
  let dataDir: string;

  beforeAll(async () => {
    cluster = await startRedisCluster();
    st = await freshStore('clusterfault');
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-cluster-faults-'));
    server = await spawnServer({
      ...cluster.env,
      DATABASE_URL: st.url,
      IDMINT_DATA_DIR: dataDir,
      IDMINT_ADMIN_TOKEN: TOKEN,
      IDMINT_WORKER_ID_PROVIDER: 'redis',
      // A new registry is guarded for two leases before its first id is used (it could be one that lost writes).
      IDMINT_WORKER_ID_LEASE_MS: '5000',
      IDMINT_REFILL_EVERY_MS: '1000',
      IDMINT_POOL_MIN_DEPTH: '2000',
      LOG_LEVEL: 'info',
    });
  }, 180_000);

  afterAll(async () => {
    await server?.stop('SIGTERM');
    await cluster?.close();
    await st?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }, 60_000);

  it('serves through each fault with every ID unique, and the pools serve again after each promotion', async () => {
    const tags = { counter: 'rcount', list: 'rlist' } as const;
    for (const [kind, bizTag] of Object.entries(tags)) {
      const created = await fetch(`${server.url}/v1/biz`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ bizTag, step: 500, fallback: 'segment', pool: `redis-${kind}` }),
      });
      expect(created.status, await created.clone().text()).toBe(201);
    }
    const ids = new Map<string, string[]>(Object.values(tags).map((t) => [t, []]));
    const fromPool = new Map<string, number[]>(Object.values(tags).map((t) => [t, []]));
    const errors: string[] = [];
    let running = true;
    const client = async (bizTag: string): Promise<void> => {
      while (running) {
        const response = await fetch(`${server.url}/v1/ids/${bizTag}?count=${1 + Math.floor(Math.random() * 50)}`);
        const body = (await response.json()) as { ids?: string[]; source?: string };
        if (!response.ok || !body.ids) {
          errors.push(`${response.status} ${JSON.stringify(body)}`);
          await sleep(20);
          continue;
        }
        ids.get(bizTag)!.push(...body.ids);
        if (body.source === 'pool') fromPool.get(bizTag)!.push(Date.now());
      }
    };
    const clients = Promise.all(Array.from({ length: 8 }, (_, i) => client(i % 2 ? tags.list : tags.counter)));
    const total = (): number => [...ids.values()].reduce((n, l) => n + l.length, 0);
    const detail = (): string =>
      `${total()} IDs, pool replies ${[...fromPool].map(([t, l]) => `${t} ${l.length}`).join(', ')}; errors ${errors.length}: ${errors.slice(-3).join(' | ')}; the server's last output:\n${server.output().slice(-3000)}`;
    const poolBackAfter = async (bizTag: string, t: number, what: string, timeoutMs = 60_000): Promise<number> => {
      await until(`${bizTag}'s pool serving again ${what}`, () => fromPool.get(bizTag)!.filter((s) => s > t).length > 100, { timeoutMs, detail });
      return fromPool.get(bizTag)!.find((s) => s > t)! - t;
    };
    // The API serves pool IDs from a range it holds in memory for a while after Redis stops
    // answering; what a fault costs is the longest stretch without a pool reply around it.
    const longestPoolGap = (bizTag: string, from: number, to: number): number => {
      const times = [from, ...fromPool.get(bizTag)!.filter((s) => s > from && s < to), to];
      return Math.max(...times.slice(1).map((t, i) => t - times[i]!));
    };
    const report: string[] = [];
    try {
      await until('IDs from both pools', () => [...fromPool.values()].every((l) => l.length > 100) && total() > 20_000, { timeoutMs: 60_000, detail });
      // bull-board reads the hash-tagged queue, the stats read each pool's meta and demand, the
      // status page both, all on the Cluster; the worker id came from the Redis provider's script.
      for (const path of ['/ui/api/queues', '/v1/stats', '/status']) {
        const page = await fetch(`${server.url}${path}`, { headers: auth });
        expect(page.status, `${path}: ${await page.clone().text()}`).toBe(200);
      }
      expect(JSON.stringify(await (await fetch(`${server.url}/v1/stats`, { headers: auth })).json())).toContain(tags.list);
      expect(server.output()).toMatch(/"where":"Redis[^\n]*"msg":"worker id leased"/);

      // 1. The primary of the counter tag's slot hung until its replica is promoted: the pool
      //    serves from the new primary while the old one hangs; resumed, it holds the old pool
      //    until the cluster makes it a replica of the new one.
      const pausedAt = Date.now();
      const paused = await cluster.pauseOwner(`idmint:{${tags.counter}}:counter`);
      const promotedAt = Date.now();
      const lastBefore =
        fromPool
          .get(tags.counter)!
          .filter((s) => s < promotedAt)
          .at(-1) ?? 0;
      let back1: number;
      try {
        back1 = await poolBackAfter(tags.counter, promotedAt, 'while the old primary still hangs', 30_000);
      } finally {
        paused.resume();
      }
      await until('the old primary turned replica', async () => (await cluster.roleOf(paused.from)) === 'slave', { timeoutMs: 60_000, detail });
      report.push(
        `hung primary ${paused.from} -> ${paused.to}, promoted ${promotedAt - pausedAt} ms after the SIGSTOP: ${tags.counter}'s longest stretch without a pool reply ${longestPoolGap(tags.counter, pausedAt, promotedAt + back1)} ms, pool replies until ${lastBefore - pausedAt} ms after the SIGSTOP and again ${back1} ms after the promotion`,
      );
      const mark1 = total();
      await until('IDs after the old primary rejoined', () => total() > mark1 + 20_000, { timeoutMs: 60_000, detail });

      // 2. The primary of the list tag's slot SIGKILLed: its replica is promoted.
      await cluster.untilHealthy();
      const killedAt = Date.now();
      const killed = await cluster.killOwner(`idmint:{${tags.list}}:ids`);
      const killPromotedAt = Date.now();
      const back2 = await poolBackAfter(tags.list, killPromotedAt, 'after its primary was killed');
      report.push(
        `killed primary ${killed.from} -> ${killed.to}, promoted ${killPromotedAt - killedAt} ms after the SIGKILL: ${tags.list}'s longest stretch without a pool reply ${longestPoolGap(tags.list, killedAt, killPromotedAt + back2)} ms, pool replies again ${back2} ms after the promotion`,
      );
      const mark2 = total();
      await until('IDs after the second promotion', () => total() > mark2 + 20_000 && fromPool.get(tags.counter)!.some((s) => s > killPromotedAt), {
        timeoutMs: 60_000,
        detail,
      });
    } finally {
      running = false;
      await clients;
    }
    const replaced = server.output().match(/took no job while jobs wait/g)?.length ?? 0;
    console.info(`redis cluster faults: ${total()} IDs, ${errors.length} errors, stuck refill workers replaced ${replaced}; ${report.join('; ')}`);
    // The promoted replicas held copies of pools their primaries had served from: the fence dropped them.
    expect(server.output()).toMatch(/dropped a (stale )?pool/);
    expect(server.output()).not.toMatch(/CROSSSLOT/);
    expect(errors, detail()).toEqual([]);
    for (const [bizTag, list] of ids) expectNoDuplicates(list, `${bizTag} IDs through Redis Cluster failovers`);
  }, 600_000);
});
