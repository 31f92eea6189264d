import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafkaClient } from '../../src/client/kafka/rpc-client.js';
import { createKafka } from '../../src/kafka/kafkajs/client.js';
import { REQUEST_TOPIC } from '../../src/kafka/names.js';
import { until } from '../support/poll.js';
import { freePort } from '../support/ports.js';
import { spawnServer, untilReady, type SpawnedServer } from '../support/spawn.js';
import { expectNoDuplicates } from '../support/unique.js';
import { TEST_VERIFY_KEY } from '../support/signing.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../', import.meta.url));
const TOKEN = 'infra-ha-admin-token';

// `IDMINT_INFRA_HA=1 bash scripts/infra.sh up` on a private directory and ports: three Kafka
// brokers, a ZooKeeper ensemble of three, Redis with two replicas under three Sentinels, and
// Postgres; idmint serve runs on what it writes to its env file (every connection kind of the
// replicated profile), and `down` leaves no process.
describe('the replicated infra profile (IDMINT_INFRA_HA=1)', () => {
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let vars: Record<string, string>;
  let server: SpawnedServer | undefined;
  let dataDir: string;

  const infra = async (...args: string[]): Promise<string> => {
    try {
      const { stdout, stderr } = await run('bash', [join(root, 'scripts/infra.sh'), ...args], { env, cwd: root, timeout: 300_000 });
      return stdout + stderr;
    } catch (err) {
      const e = err as { stderr?: string; stdout?: string; message: string };
      throw new Error(`infra.sh ${args.join(' ')} failed: ${e.stderr?.trim() || e.message}`, { cause: err });
    }
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'idmint-infra-ha-'));
    chmodSync(dir, 0o755); // Postgres runs as the postgres user when we are root
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-infra-ha-data-'));
    env = {
      ...process.env,
      IDMINT_INFRA_HA: '1',
      IDMINT_INFRA_DIR: dir,
      IDMINT_INFRA_LIB: join(root, '.infra/lib'),
      IDMINT_INFRA_PG_PORT: String(await freePort()),
      IDMINT_INFRA_HA_PORT: '29100',
    };
    // The shared servers' variables would make infra.sh treat ours as external.
    for (const name of ['DATABASE_URL', 'REDIS_URL', 'KAFKA_BROKERS', 'ZK_CONNECT']) delete env[name];
    await infra('up');
    vars = Object.fromEntries(
      readFileSync(join(dir, 'env'), 'utf8')
        .split('\n')
        .map((line) => /^export ([A-Z_]+)=(.*)$/.exec(line))
        .filter((m): m is RegExpExecArray => m !== null)
        .map((m) => [m[1]!, m[2]!]),
    );
  }, 400_000);

  afterAll(async () => {
    await server?.stop('SIGKILL');
    await infra('down').catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  }, 120_000);

  it("writes three Kafka brokers, three ZooKeeper servers, three Sentinels and a Redis Cluster's nodes to its env file", () => {
    expect(vars.KAFKA_BROKERS!.split(',')).toHaveLength(3);
    expect(vars.ZK_CONNECT!.split(',')).toHaveLength(3);
    expect(vars.REDIS_SENTINELS!.split(',')).toHaveLength(3);
    expect(vars.REDIS_SENTINEL_NAME).toBe('idmint-pools');
    expect(vars.REDIS_URL).toBeUndefined();
    expect(vars.DATABASE_URL).toMatch(/^postgres:\/\//);
  });

  it('idmint serve runs on it: pools through Sentinel, worker ids from the ensemble, Kafka request/reply on replicated topics', async () => {
    server = await spawnServer({ ...vars, IDMINT_DATA_DIR: dataDir, IDMINT_ADMIN_TOKEN: TOKEN, IDMINT_REFILL_EVERY_MS: '1000' }, { timeoutMs: 120_000 });
    const ready = await untilReady(server.url, { status: 'ready', timeoutMs: 120_000, output: server.output });
    expect(ready.status).toBe('ready');
    const post = (body: object): Promise<Response> =>
      fetch(`${server!.url}/v1/biz`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect((await post({ bizTag: 'hapool', step: 1000 })).status).toBe(201);
    expect((await post({ bizTag: 'hasnow', mode: 'snowflake' })).status).toBe(201);
    const ids: string[] = [];
    await until(
      'IDs from the Redis pool behind Sentinel',
      async () => {
        const body = (await (await fetch(`${server!.url}/v1/ids/hapool?count=100`)).json()) as { ids: string[]; source: string };
        ids.push(...body.ids);
        return body.source === 'pool';
      },
      { timeoutMs: 60_000, detail: () => server!.output().slice(-2000) },
    );
    const snow = (await (await fetch(`${server.url}/v1/ids/hasnow?count=100`)).json()) as { ids: string[] };
    expect(snow.ids).toHaveLength(100);
    expect(server.output()).toMatch(/"where":"ZooKeeper[^\n]*"msg":"worker id leased"/);
    const client = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, brokers: vars.KAFKA_BROKERS!, clientId: 'infra-ha', timeoutMs: 10_000 });
    try {
      await client.start();
      ids.push(...(await client.getIds('hapool', 500)));
    } finally {
      await client.close();
    }
    expectNoDuplicates([...ids, ...snow.ids]);
    const admin = createKafka({ brokers: vars.KAFKA_BROKERS!, clientId: 'infra-ha-admin' }).admin();
    await admin.connect();
    try {
      const meta = await admin.fetchTopicMetadata({ topics: [REQUEST_TOPIC] });
      expect(meta.topics[0]!.partitions.every((p) => p.replicas.length === 3)).toBe(true);
    } finally {
      await admin.disconnect();
    }
    await server.stop('SIGTERM');
    server = undefined;
  }, 300_000);

  it('idmint serve runs on its Redis Cluster instead: pools and the refill queue on six nodes, no CROSSSLOT', async () => {
    // The test before stops its server when it passes; when it failed, its process still holds the data directory.
    await server?.stop('SIGKILL');
    server = undefined;
    expect(vars.IDMINT_INFRA_REDIS_CLUSTER_NODES!.split(',')).toHaveLength(6);
    const { REDIS_SENTINELS: _s, REDIS_SENTINEL_NAME: _n, ...rest } = vars;
    server = await spawnServer(
      {
        ...rest,
        REDIS_CLUSTER_NODES: vars.IDMINT_INFRA_REDIS_CLUSTER_NODES!,
        IDMINT_DATA_DIR: dataDir,
        IDMINT_ADMIN_TOKEN: TOKEN,
        IDMINT_REFILL_EVERY_MS: '1000',
      },
      { timeoutMs: 120_000 },
    );
    const ready = await untilReady(server.url, { status: 'ready', timeoutMs: 120_000, output: server.output });
    expect(ready.status).toBe('ready');
    const post = (body: object): Promise<Response> =>
      fetch(`${server!.url}/v1/biz`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect((await post({ bizTag: 'hacluster', step: 1000, pool: 'redis-list' })).status).toBe(201);
    const ids: string[] = [];
    for (const bizTag of ['hapool', 'hacluster']) {
      await until(
        `IDs of ${bizTag} from a Redis pool on the Cluster`,
        async () => {
          const body = (await (await fetch(`${server!.url}/v1/ids/${bizTag}?count=100`)).json()) as { ids: string[]; source: string };
          ids.push(...body.ids);
          return body.source === 'pool';
        },
        { timeoutMs: 60_000, detail: () => server!.output().slice(-2000) },
      );
    }
    expectNoDuplicates(ids);
    expect(server.output()).not.toMatch(/CROSSSLOT/);
    await server.stop('SIGTERM');
    server = undefined;
  }, 300_000);

  it('down stops every server it started', async () => {
    await infra('down');
    // A bracket in the pattern keeps pgrep from matching the shell that runs it.
    const { stdout } = await run('bash', ['-c', `pgrep -af -- '${dir.replace('idmint-infra-ha-', '[i]dmint-infra-ha-')}' || true`]);
    expect(stdout.trim()).toBe('');
    const redis = await run('bash', ['-c', 'pgrep -af "redis-server 127.0.0.1:291[0-9][0-9]" || true']);
    expect(redis.stdout.trim()).toBe('');
  }, 120_000);
});
