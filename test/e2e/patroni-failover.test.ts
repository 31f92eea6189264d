import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { env } from '../support/env.js';
import { IdLoad, tagMetric } from '../support/id-load.js';
import { uniqueName } from '../support/names.js';
import { PgHa, type Member } from '../support/pg-ha.js';
import { sleep, untilValue } from '../support/poll.js';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';
import { duplicatesOf } from '../support/unique.js';

const TOKEN = 'patroni-admin';
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

/**
 * Three Postgres nodes under Patroni (scripts/pg-ha.sh, the project's ZooKeeper as its DCS),
 * asynchronous, two `idmint serve` processes on the multi-host URL with the segment fence, HTTP
 * load: the leader's WAL delivery is frozen, segments are handed out, the leader is SIGKILLed and
 * Patroni promotes a replica that never received them (within maximum_lag_on_failover).
 */
describe('Patroni failover that loses the last commits, under load', () => {
  let ha: PgHa;
  const dir = mkdtempSync(join(tmpdir(), 'idmint-patroni-test-'));
  const servers: SpawnedServer[] = [];
  let bizTag = '';
  const handedOut: string[] = [];

  beforeAll(async () => {
    ha = await PgHa.start(env('ZK_CONNECT'), { scope: uniqueName('idmint-test') });
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop('SIGKILL')));
    await ha?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the fence keeps the promoted replica from repeating what the lost leader handed out: zero duplicates', async () => {
    const envs = [0, 1].map((i) => ({
      IDMINT_DATA_DIR: mkdtempSync(join(dir, `api-${i}-`)),
      IDMINT_ADMIN_TOKEN: TOKEN,
      DATABASE_URL: ha.url,
      ZK_CONNECT: env('ZK_CONNECT'),
      // Each its own worker id: the file provider would give both 0, and their Snowflake fallbacks
      // would repeat each other's IDs within a millisecond (what the ZooKeeper or Postgres provider prevents).
      IDMINT_WORKER_ID: String(i + 1),
      IDMINT_TAG_CACHE_MS: '200',
    }));
    for (const e of envs) servers.push(await spawnServer(e));
    bizTag = uniqueName('patroni');
    const created = await fetch(`${servers[0]!.url}/v1/biz`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ bizTag, step: 100, fallback: 'snowflake' }),
    });
    expect(created.status, await created.clone().text()).toBe(201);

    const load = new IdLoad(servers, bizTag);
    await sleep(1000);
    const leader = (await ha.leader()) as Member;
    // Freeze the leader's WAL senders: what it commits from now on reaches no replica.
    await ha.freeze(leader);
    const atStop = await load.allocations();
    await untilValue(
      'segments allocated on the leader after WAL delivery stopped',
      () => load.allocations(),
      (n) => n >= atStop + 6,
      { timeoutMs: 60_000, intervalMs: 100 },
    );

    // The leader crashes; the first process crashes with it and comes back; the second idles, so
    // only the fence knows what was handed out.
    load.idle.add(1);
    const crashedAt = Date.now();
    await ha.kill(leader);
    await servers[0]!.stop('SIGKILL');
    const promoted = await ha.promotedAfter(leader);
    const promotedAfterMs = Date.now() - crashedAt;
    // Back once there is a primary again (a process starting before that exits NOT_READY naming the hosts, and its supervisor restarts it).
    servers[0] = await spawnServer(envs[0]!);
    const atPromotion = await load.allocations();
    await untilValue(
      'segments from the promoted replica',
      () => load.allocations(),
      (n) => n >= atPromotion + 6,
      { timeoutMs: 90_000, intervalMs: 200 },
    );
    const segmentsBackAfterMs = Date.now() - crashedAt;
    load.idle.delete(1);
    await sleep(500);
    await load.stop();

    expect(duplicatesOf(load.ids), `statuses ${load.describe()}`).toEqual([]);
    // One push per ID: spreading hundreds of thousands of arguments overflows the stack.
    for (const id of load.ids) handedOut.push(id);
    const rewinds = await tagMetric(servers, bizTag, 'idmint_segment_rewinds_total');
    expect(rewinds).toBeGreaterThan(0);
    console.log(
      `Patroni: ${leader} killed, ${promoted} promoted after ${promotedAfterMs} ms, segments served again after ${segmentsBackAfterMs} ms; ${load.ids.length} IDs, 0 duplicates, ${rewinds} rewind(s); ${load.describe()}`,
    );
  });

  it('a planned switchover (patronictl) under load: no rewind, and nothing repeats what came before', async () => {
    expect(bizTag, 'runs after the failover test').not.toBe('');
    const rewindsBefore = await tagMetric(servers, bizTag, 'idmint_segment_rewinds_total');
    const load = new IdLoad(servers, bizTag);
    await sleep(1000);
    const leader = (await ha.leader()) as Member;
    // A switchover to a replica that has not replayed everything loses those commits like a
    // crash does (Patroni allows it within maximum_lag_on_failover): wait for the replicas first.
    await ha.caughtUp();
    const startedAt = Date.now();
    await ha.switchover(leader);
    const promoted = await ha.promotedAfter(leader);
    const switchedAfterMs = Date.now() - startedAt;
    const atSwitch = await load.allocations();
    await untilValue(
      'segments from the new leader',
      () => load.allocations(),
      (n) => n >= atSwitch + 6,
      { timeoutMs: 90_000, intervalMs: 200 },
    );
    const segmentsBackAfterMs = Date.now() - startedAt;
    await load.stop();

    expect(duplicatesOf([...handedOut, ...load.ids]), `statuses ${load.describe()}`).toEqual([]);
    expect(await tagMetric(servers, bizTag, 'idmint_segment_rewinds_total')).toBe(rewindsBefore);
    console.log(
      `Patroni switchover: ${leader} → ${promoted} after ${switchedAfterMs} ms, segments served again after ${segmentsBackAfterMs} ms; ${load.ids.length} IDs (${handedOut.length + load.ids.length} with the failover's), 0 duplicates, no rewind; ${load.describe()}`,
    );
  });
});
