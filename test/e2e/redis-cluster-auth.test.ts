import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../support/poll.js';
import { startRedisCluster, type RedisClusterSet } from '../support/redis-cluster.js';
import { runUntilExit, spawnServer, type SpawnedServer } from '../support/spawn.js';
import { expectNoDuplicates } from '../support/unique.js';

const TOKEN = 'cluster-auth-token';
const PASSWORD = 'cluster-s3cret-pw';
const USER = 'idmint-pools';

// A Redis Cluster secured as in production: its nodes know one ACL user (the default user off,
// replicas log in as that user) and speak TLS only (clients, replication, the cluster bus).
// idmint serve reaches it with REDIS_CLUSTER_NODES, the user, password and `rediss:` scheme in
// REDIS_URL (its host ignored) and the CA in IDMINT_REDIS_TLS_CA, serves from a list pool and a
// counter pool; a wrong password, or no user, stops the start with one line naming REDIS_URL.
describe('Redis pools on a Redis Cluster on TLS with an ACL user (REDIS_CLUSTER_NODES with a rediss: REDIS_URL)', () => {
  let cluster: RedisClusterSet;
  let server: SpawnedServer | undefined;
  let dataDir: string;

  beforeAll(async () => {
    cluster = await startRedisCluster({ password: PASSWORD, user: USER, tls: true });
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-cluster-auth-'));
  }, 120_000);

  afterAll(async () => {
    await server?.stop('SIGKILL');
    await cluster?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it.each([
    ['a wrong password', `rediss://${USER}:wrong-password@cluster:6379`],
    ['the right password without the user (the default user is off)', `rediss://:${PASSWORD}@cluster:6379`],
  ])(
    'refuses %s at start, naming REDIS_URL',
    async (_what, url) => {
      const { code, output } = await runUntilExit({ ...cluster.env, REDIS_URL: url, IDMINT_DATA_DIR: dataDir });
      expect(code, output.slice(-3000)).toBe(1);
      expect(output).toMatch(/refused idmint's credentials.*REDIS_URL/);
      expect(output).not.toMatch(/\n\s+at /);
    },
    60_000,
  );

  it('serves both Redis pool kinds from the Cluster', async () => {
    server = await spawnServer({
      ...cluster.env,
      REDIS_URL: `rediss://${USER}:${PASSWORD}@cluster:6379`,
      IDMINT_DATA_DIR: dataDir,
      IDMINT_ADMIN_TOKEN: TOKEN,
      IDMINT_REFILL_EVERY_MS: '1000',
    });
    for (const pool of ['redis-list', 'redis-counter']) {
      const bizTag = `auth-${pool}`;
      const ids: string[] = [];
      const created = await fetch(`${server.url}/v1/biz`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ bizTag, step: 1000, pool }),
      });
      expect(created.status).toBe(201);
      await until(
        `IDs of ${bizTag} from its pool on the Cluster`,
        async () => {
          const body = (await (await fetch(`${server!.url}/v1/ids/${bizTag}?count=100`)).json()) as { ids: string[]; source: string };
          ids.push(...body.ids);
          return body.source === 'pool';
        },
        { timeoutMs: 60_000, detail: () => server!.output().slice(-2000) },
      );
      expectNoDuplicates(ids, `${bizTag} IDs`);
    }
    expect(server.output()).not.toMatch(new RegExp(PASSWORD));
  }, 120_000);
});
