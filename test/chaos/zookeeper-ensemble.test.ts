import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdLoad } from '../support/id-load.js';
import { sleep, until } from '../support/poll.js';
import { runUntilExit, spawnServer, untilReady, type SpawnedServer } from '../support/spawn.js';
import { freshStore, type TestStore } from '../support/store.js';
import { expectNoDuplicates } from '../support/unique.js';
import { startZkEnsemble, type ZkEnsemble } from '../support/zk-ensemble.js';

// ZK_CONNECT naming three servers: worker ids (Snowflake) and the segment fence live through the
// loss of the leader, of a follower, and of the quorum itself (Snowflake pausing once the leases
// could have lapsed). Two API processes serve a
// Snowflake tag and a segment tag (small steps: a fence write every few hundred IDs) throughout.
// Secured as in production: IDMINT_ZK_AUTH's digest user owns every node idmint creates.
describe('a ZooKeeper ensemble of three, servers lost under load', () => {
  let zk: ZkEnsemble;
  let st: TestStore;
  const servers: SpawnedServer[] = [];
  const dirs: string[] = [];
  const env = (): Record<string, string> => {
    const dir = mkdtempSync(join(tmpdir(), 'idmint-zkens-'));
    dirs.push(dir);
    return {
      DATABASE_URL: st.url,
      ZK_CONNECT: zk.connect,
      IDMINT_WORKER_ID_PROVIDER: 'zookeeper',
      IDMINT_ZK_AUTH: 'idmint:ensemble-digest-pw',
      IDMINT_DATA_DIR: dir,
      IDMINT_ROLES: 'api',
    };
  };

  beforeAll(async () => {
    zk = await startZkEnsemble(3);
    st = await freshStore('zkens');
    for (let i = 0; i < 2; i++) servers.push(await spawnServer(env(), { timeoutMs: 120_000 }));
    for (const server of servers) await untilReady(server.url, { status: 'ready', timeoutMs: 60_000, output: server.output });
    const post = (body: object): Promise<Response> =>
      fetch(`${servers[0]!.url}/v1/biz`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect((await post({ bizTag: 'zsnow', mode: 'snowflake' })).status).toBe(201);
    expect((await post({ bizTag: 'zseg', step: 200 })).status).toBe(201);
  }, 300_000);

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop('SIGTERM')));
    await st?.close();
    await zk?.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  it('serves through the leader killed and a follower killed; without a quorum Snowflake serves until the leases could lapse, then pauses until it is back; a start without a quorum fails clearly; 0 duplicates', async () => {
    const snow = new IdLoad(servers, 'zsnow', { loopsPer: 2, count: 50 });
    const seg = new IdLoad(servers, 'zseg', { loopsPer: 2, count: 50 });
    const flowing = async (what: string): Promise<void> => {
      const [a, b] = [snow.ids.length, seg.ids.length];
      await until(`IDs of both tags ${what}`, () => snow.ids.length > a + 500 && seg.ids.length > b + 500, {
        timeoutMs: 30_000,
        detail: () => `snowflake ${snow.describe()} segment ${seg.describe()}`,
      });
    };
    try {
      await flowing('before the faults');

      const leader = await zk.leader();
      await zk.kill(leader);
      await sleep(3000);
      await flowing('with the leader killed');
      await zk.start(leader);

      const leading = await zk.leader();
      const victim = zk.ids.find((id) => id !== leading)!; // a follower
      await zk.kill(victim);
      await sleep(3000);
      await flowing('with a follower killed');
      await zk.start(victim);

      // No quorum: the workers serve on the ids they hold until their leases (the sessions) could
      // expire, then refuse Snowflake IDs (503 NOT_READY) rather than risk a second holder; a new
      // process cannot register. With the quorum back, they take their ids again and serve on.
      const [first, second] = zk.ids.filter((id) => id !== 3);
      const snowBefore = snow.ids.length;
      await zk.kill(first!);
      await zk.kill(second!);
      const quorumLostAt = Date.now();
      await sleep(2000);
      expect(snow.ids.length, `snowflake in the first 2 s without a quorum ${snow.describe()}`).toBeGreaterThan(snowBefore);
      const refused = await runUntilExit({ ...env(), LOG_LEVEL: 'info' }, 60_000);
      await sleep(Math.max(0, 12_000 - (Date.now() - quorumLostAt)));
      const paused = snow.ids.length;
      await sleep(1000);
      // Past the session timeout (10 s here: 20 ticks of 500 ms) nothing is issued under a lease that could have lapsed.
      expect(snow.ids.length, `snowflake 12-13 s without a quorum ${snow.describe()}`).toBe(paused);
      expect(snow.describe()).toContain('NOT_READY');
      await zk.start(first!);
      await zk.start(second!);
      await flowing('after the quorum returned');

      expect(refused.code, refused.output).not.toBe(0);
      expect(refused.output).toMatch(/ZooKeeper|ZK_CONNECT/);
      expect(refused.output).not.toMatch(/\n\s+at /); // one line, no stack

      // With the quorum back, a new process registers a worker id of its own and serves.
      const third = await spawnServer(env(), { timeoutMs: 120_000 });
      servers.push(third);
      const fromThird = (await (await fetch(`${third.url}/v1/ids/zsnow?count=100`)).json()) as { ids: string[] };
      snow.ids.push(...fromThird.ids);
      console.info(`zookeeper ensemble: snowflake ${snow.ids.length} IDs ${snow.describe()}; segment ${seg.ids.length} IDs ${seg.describe()}`);
    } finally {
      await snow.stop();
      await seg.stop();
    }
    expectNoDuplicates(snow.ids, 'Snowflake IDs through ZooKeeper faults');
    expectNoDuplicates(seg.ids, 'segment IDs through ZooKeeper faults');
  }, 400_000);
});
