import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import zookeeper, { type Client as ZkClient } from 'node-zookeeper-client';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idmint } from '../support/cli.js';
import { env } from '../support/env.js';
import { until } from '../support/poll.js';
import { freePort, spawnServer, untilReady, type SpawnedServer } from '../support/spawn.js';
import { expectNoDuplicates } from '../support/unique.js';

// Issue 39, "one deployment, one truth": every row of the outside probe's table, on the real
// servers with several `idmint serve` processes. Before, each row handed out IDs twice or served a
// closed tag: idle processes answered from caches of any age, a process without ZK_CONNECT numbered
// its worker from Postgres and allocated unfenced segments, fence marks were world-writable, and
// the obfuscation key was each process's own.
const TOKEN = 'one-truth-admin-token';
const KEY_ONE = 'one-truth-key-one-0123456789';
const KEY_TWO = 'one-truth-key-two-9876543210';
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const IDLE_MS = 30_000;

interface Ids {
  ids: string[];
}

async function json<T>(response: Response): Promise<T> {
  return (await response.json()) as T;
}

describe('one deployment, one truth (issue 39)', () => {
  const run = randomBytes(4).toString('hex');
  const schema = `idmint_truth_${run}`;
  const dirs: string[] = [];
  const servers: SpawnedServer[] = [];
  let db: pg.Client;
  let url: string;
  let a: SpawnedServer; // every role, ZooKeeper: the deployment as it should be
  let b: SpawnedServer; // api only, same config: the idle process
  let c: SpawnedServer; // api without ZK_CONNECT
  let d: SpawnedServer; // refill worker without ZK_CONNECT
  let revokedToken: string;
  let idleSince = 0;

  const base = (): Record<string, string> => ({
    DATABASE_URL: url,
    REDIS_URL: env('REDIS_URL'),
    IDMINT_ADMIN_TOKEN: TOKEN,
    IDMINT_POOL_KEY_PREFIX: `truth${run}:`,
    IDMINT_REFILL_QUEUE: `truth-${run}`,
    IDMINT_REFILL_EVERY_MS: '1000',
    IDMINT_OBFUSCATION_KEY: KEY_ONE,
    IDMINT_DEPLOYMENT_CHECK_MS: '500',
  });
  const start = async (extra: Record<string, string>): Promise<SpawnedServer> => {
    const dir = mkdtempSync(join(tmpdir(), 'idmint-truth-'));
    dirs.push(dir);
    const port = String(await freePort());
    const server = await spawnServer({ ...base(), IDMINT_DATA_DIR: dir, IDMINT_PORT: port, IDMINT_ADVERTISE: `127.0.0.1:${port}`, ...extra });
    servers.push(server);
    return server;
  };
  const create = async (body: Record<string, unknown>): Promise<void> => {
    const response = await fetch(`${a.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify(body) });
    expect(response.status, await response.clone().text()).toBe(201);
  };
  const burst = (n: number, request: () => Promise<Response>): Promise<Response[]> => Promise.all(Array.from({ length: n }, request));

  beforeAll(async () => {
    db = new pg.Client({ connectionString: env('DATABASE_URL') });
    await db.connect();
    await db.query(`CREATE SCHEMA ${schema}`);
    const u = new URL(env('DATABASE_URL'));
    u.searchParams.set('options', `-c search_path=${schema}`);
    url = u.toString();
    a = await start({ ZK_CONNECT: env('ZK_CONNECT'), IDMINT_PG_SCHEMA: schema });
    for (const body of [
      { bizTag: 'tok', pool: 'memory' },
      { bizTag: 'rev', pool: 'memory' },
      { bizTag: 'lim', pool: 'memory', step: 1000, fallback: 'segment' },
      { bizTag: 'del', pool: 'memory' },
      { bizTag: 'hot', pool: 'memory' },
      { bizTag: 'snow', mode: 'snowflake' },
      { bizTag: 'pooled', pool: 'redis-list', step: 100 },
      { bizTag: 'seg', pool: 'memory' },
      { bizTag: 'fenced', pool: 'redis-list', step: 100, fallback: 'segment' },
      { bizTag: 'secret', format: 'obfuscated', maxLimit: 4294967295, step: 1000 },
    ]) {
      await create(body);
    }
    const created = await json<{ token: string }>(await fetch(`${a.url}/v1/biz/rev/tokens`, { method: 'POST', headers: admin }));
    revokedToken = created.token;
    b = await start({ ZK_CONNECT: env('ZK_CONNECT'), IDMINT_PG_SCHEMA: schema, IDMINT_ROLES: 'api' });
    // B serves every tag of the cache rows, then idles while the other rows run.
    for (const tag of ['tok', 'lim', 'del', 'hot']) expect((await fetch(`${b.url}/v1/ids/${tag}?count=10`)).status).toBe(200);
    expect((await fetch(`${b.url}/v1/ids/rev?count=10&token=${revokedToken}`)).status).toBe(200);
    idleSince = Date.now();
  });

  afterAll(async () => {
    for (const server of servers) await server.stop('SIGKILL');
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    await db?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await db?.end();
  });

  it('a process without ZK_CONNECT in a ZooKeeper deployment issues no Snowflake ID, fallback included, and says why', async () => {
    c = await start({ IDMINT_PG_SCHEMA: schema, IDMINT_ROLES: 'api' });
    for (const path of ['/v1/ids/snow?count=10', '/api/snowflake/get/snow']) {
      const response = await fetch(`${c.url}${path}`);
      expect(response.status, path).toBe(503);
      expect(await response.text()).toMatch(/ZK_CONNECT/);
    }
    // Nor a segment (the deployment fences its segments in ZooKeeper, this process cannot), so
    // the ladder ends at its last rung, Snowflake, refused as above.
    const seg = await fetch(`${c.url}/v1/ids/seg?count=10`);
    expect(seg.status).toBe(503);
    expect(await seg.text()).toMatch(/ZK_CONNECT/);
    // Pools filled by the deployment's refill still serve here.
    await until('the pooled tag served from Redis through C', async () => (await fetch(`${c.url}/v1/ids/pooled?count=10`)).status === 200, {
      timeoutMs: 30_000,
    });
    const report = await untilReady(c.url, { status: 'degraded' });
    expect(report.checks.deployment?.message).toMatch(/worker-id-registry differs \(check ZK_CONNECT/);
    expect(report.checks.deployment?.message).toMatch(/segment-fence differs/);
    expect(report.checks.deployment?.message).toMatch(/refused here: Snowflake IDs/);
    const metrics = await (await fetch(`${c.url}/metrics`)).text();
    expect(metrics).toMatch(/idmint_deployment_mismatch\{setting="worker-id-registry"\} 1/);
    expect(metrics).toMatch(/idmint_deployment_mismatch\{setting="segment-fence"\} 1/);
    const errorLines = c
      .output()
      .split('\n')
      .filter((l) => l.includes('"level":50') && l.includes('"setting":"worker-id-registry"'));
    expect(errorLines).toHaveLength(1);
    // A and B agree with the record: ready, and their Snowflake IDs never repeat.
    expect((await untilReady(a.url)).checks.deployment).toBeUndefined();
    const ids = (await Promise.all([a, b].map(async (s) => (await json<Ids>(await fetch(`${s.url}/v1/ids/snow?count=1000`))).ids))).flat();
    expectNoDuplicates(ids);
    // `idmint deployment show` names the process that differs.
    const shown = await idmint(['deployment', 'show'], { DATABASE_URL: url, IDMINT_PG_SCHEMA: schema });
    expect(shown.code, shown.out).toBe(0);
    expect(shown.out).toMatch(/worker-id-registry\s+zookeeper \/idmint\/deployments\/[0-9a-f-]{36}\/snowflake/);
    expect(shown.out).toContain(`127.0.0.1:${new URL(c.url).port}`);
    expect(shown.out).toMatch(/differs/);
  });

  it('a refill worker without ZK_CONNECT takes no refill job and allocates no segment; a lossy failover then repeats nothing', async () => {
    d = await start({ IDMINT_PG_SCHEMA: schema, IDMINT_ROLES: 'refill' });
    await until('D to say it takes no job', () => d.output().includes('takes no job'), { timeoutMs: 20_000 });
    // Load through A and B while D runs: the Redis pool drains and is refilled many times.
    const seen: string[] = [];
    const load = async (rounds: number): Promise<void> => {
      for (let i = 0; i < rounds; i++) {
        for (const s of [a, b]) {
          const response = await fetch(`${s.url}/v1/ids/fenced?count=50`);
          if (response.status === 200) seen.push(...(await json<Ids>(response)).ids);
        }
      }
    };
    await load(60);
    const { rows } = await db.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${schema}.idmint_ledger WHERE allocated_by LIKE $1`, [`%:${d.child.pid}`]);
    expect(Number(rows[0]!.n), 'segments allocated by the refill worker without ZK_CONNECT').toBe(0);
    // A lossy failover: the last segments' commits are lost (ledger rows and counter).
    await loseLastSegments(db, schema, 'fenced', 3);
    await load(60);
    expectNoDuplicates(seen, 'IDs of a fenced tag across a lossy failover');
    expect(seen.length).toBeGreaterThan(1000);
  });

  it('fence marks and worker nodes are not world-writable: a ZooKeeper client without the credential cannot set a mark back', async () => {
    const zk = await connectZk(env('ZK_CONNECT'));
    try {
      const { rows } = await db.query<{ value: string }>(`SELECT value FROM ${schema}.idmint_setting WHERE name = 'segment-fence'`);
      // A fresh deployment's fence lives under its own id.
      expect(rows[0]?.value).toMatch(/^zookeeper \/idmint\/deployments\/[0-9a-f-]{36}\/fence$/);
      const mark = `${rows[0]!.value.slice('zookeeper '.length)}/fenced/0`;
      const before = await getData(zk, mark);
      expect(Number(before)).toBeGreaterThan(0);
      await expect(setData(zk, mark, '0')).rejects.toMatchObject({ name: 'NO_AUTH' });
      // Never set back (the refill may raise it meanwhile).
      expect(Number(await getData(zk, mark))).toBeGreaterThanOrEqual(Number(before));
      // A fresh deployment's worker ids live under its own id too; each record holds the mark that guards its timestamps.
      const { rows: registry } = await db.query<{ value: string }>(`SELECT value FROM ${schema}.idmint_setting WHERE name = 'worker-id-registry'`);
      const workers = `${registry[0]!.value.slice('zookeeper '.length)}/workers`;
      const records = await getChildren(zk, workers);
      expect(records.length).toBeGreaterThanOrEqual(2);
      for (const record of records) await expect(setData(zk, `${workers}/${record}`, '{"markMs":0}')).rejects.toMatchObject({ name: 'NO_AUTH' });
    } finally {
      zk.close();
    }
    // The lossy failover after the attempt: the mark held, so nothing repeats. Taken until a
    // segment is allocated after the loss (the Redis pool may hold many requests' worth: a CI run
    // saw none in 20 requests), so the check covers the allocation the mark guards.
    const seen: string[] = [];
    const take = async (): Promise<void> => {
      const response = await fetch(`${a.url}/v1/ids/fenced?count=50`);
      if (response.status === 200) seen.push(...(await json<Ids>(response)).ids);
    };
    const segments = async (): Promise<number> =>
      Number((await db.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${schema}.idmint_ledger WHERE biz_tag = 'fenced'`)).rows[0]!.n);
    for (let i = 0; i < 20; i++) await take();
    await loseLastSegments(db, schema, 'fenced', 3);
    const left = await segments();
    await until(
      'a segment allocated after the lossy failover',
      async () => {
        await take();
        return (await segments()) > left;
      },
      { timeoutMs: 120_000, intervalMs: 0 },
    );
    expectNoDuplicates(seen);
  });

  it('the obfuscation key row deleted under a running process, then a process with another key: it refuses the tag; 0 duplicates', async () => {
    await db.query(`DELETE FROM ${schema}.idmint_setting WHERE name = 'obfuscation-key-fingerprint'`);
    await until(
      'A to notice the vanished row',
      async () => JSON.stringify((await json<{ checks: unknown }>(await fetch(`${a.url}/readyz`))).checks).includes('vanished'),
      { timeoutMs: 10_000 },
    );
    const other = await start({ ZK_CONNECT: env('ZK_CONNECT'), IDMINT_PG_SCHEMA: schema, IDMINT_ROLES: 'api', IDMINT_OBFUSCATION_KEY: KEY_TWO });
    const refused = await fetch(`${other.url}/v1/ids/secret?count=100`);
    expect(refused.status).toBe(503);
    expect(await refused.text()).toMatch(/IDMINT_OBFUSCATION_KEY/);
    // The row stays gone: the newcomer did not claim its own key.
    const { rows } = await db.query(`SELECT 1 FROM ${schema}.idmint_setting WHERE name = 'obfuscation-key-fingerprint'`);
    expect(rows).toHaveLength(0);
    const ids: string[] = [];
    for (let round = 0; round < 100; round++) {
      for (const s of [a, b, other]) {
        const response = await fetch(`${s.url}/v1/ids/secret?count=1000`);
        if (response.status === 200) ids.push(...(await json<Ids>(response)).ids);
      }
    }
    expect(ids.length).toBe(200_000);
    expectNoDuplicates(ids, 'obfuscated IDs');
    // Restored by the explicit command, every process agrees again.
    const set = await idmint(['deployment', 'set', 'obfuscation-key-fingerprint', '--from-env'], {
      DATABASE_URL: url,
      IDMINT_PG_SCHEMA: schema,
      IDMINT_OBFUSCATION_KEY: KEY_ONE,
    });
    expect(set.code, set.out).toBe(0);
    await until(
      'A to agree again',
      async () => (await json<{ checks: Record<string, unknown> }>(await fetch(`${a.url}/readyz`))).checks.deployment === undefined,
      { timeoutMs: 10_000 },
    );
  });

  it('biz create --regions refuses an obfuscated tag across regions whose keys differ, and creates it in none', async () => {
    const regions = await Promise.all(
      [0, 1].map(async (region) => {
        const regionSchema = `${schema}_r${region}`;
        await db.query(`CREATE SCHEMA ${regionSchema}`);
        const u = new URL(env('DATABASE_URL'));
        u.searchParams.set('options', `-c search_path=${regionSchema}`);
        return start({
          DATABASE_URL: u.toString(),
          IDMINT_PG_SCHEMA: regionSchema,
          IDMINT_ROLES: 'api',
          REDIS_URL: '',
          IDMINT_REGIONS: '2',
          IDMINT_REGION: String(region),
          IDMINT_OBFUSCATION_KEY: region === 0 ? KEY_ONE : KEY_TWO,
        });
      }),
    );
    try {
      const urls = regions.map((r) => r.url).join(',');
      const created = await idmint(['biz', 'create', 'across', '--format', 'obfuscated', '--max-limit', '4294967295', '--regions', urls, '--token', TOKEN]);
      expect(created.code).not.toBe(0);
      expect(created.out).toMatch(/IDMINT_OBFUSCATION_KEY/);
      for (const r of regions) expect((await fetch(`${r.url}/v1/biz/across`, { headers: admin })).status).toBe(404);
      // A decimal tag needs no key: created in both.
      const plain = await idmint(['biz', 'create', 'plain-across', '--regions', urls, '--token', TOKEN]);
      expect(plain.code, plain.out).toBe(0);
    } finally {
      for (const r of regions) await r.stop('SIGKILL');
      for (const region of [0, 1]) await db.query(`DROP SCHEMA IF EXISTS ${schema}_r${region} CASCADE`);
    }
  });

  it('an idle process (30 s), then a change on another: token, revocation, lower maxLimit and delete hold for a 200-request burst; a busy process within the bound', async () => {
    const hot = setInterval(() => void fetch(`${b.url}/v1/ids/hot?count=1`).catch(() => undefined), 20);
    try {
      const wait = IDLE_MS - (Date.now() - idleSince);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      expect((await fetch(`${a.url}/v1/biz/tok/tokens`, { method: 'POST', headers: admin })).status).toBe(201);
      const { tokens } = await json<{ tokens: Array<{ id: string }> }>(await fetch(`${a.url}/v1/biz/rev/tokens`, { headers: admin }));
      expect((await fetch(`${a.url}/v1/biz/rev/tokens/${tokens[0]!.id}`, { method: 'DELETE', headers: admin })).status).toBe(204);
      expect((await fetch(`${a.url}/v1/biz/lim`, { method: 'PATCH', headers: admin, body: JSON.stringify({ maxLimit: 50 }) })).status).toBe(200);
      expect((await fetch(`${a.url}/v1/biz/del`, { method: 'DELETE', headers: admin })).status).toBe(204);
      expect((await fetch(`${a.url}/v1/biz/hot/tokens`, { method: 'POST', headers: admin })).status).toBe(201);

      const [tok, rev, lim, del] = await Promise.all([
        burst(200, () => fetch(`${b.url}/v1/ids/tok?count=1`)),
        burst(200, () => fetch(`${b.url}/v1/ids/rev?count=1&token=${revokedToken}`)),
        burst(200, () => fetch(`${b.url}/v1/ids/lim?count=1`)),
        burst(200, () => fetch(`${b.url}/v1/ids/del?count=1`)),
      ]);
      expect(
        tok.filter((r) => r.status === 200),
        'requests without a token served after a token was created',
      ).toHaveLength(0);
      expect(
        rev.filter((r) => r.status === 200),
        'requests with a revoked token served',
      ).toHaveLength(0);
      expect(
        del.filter((r) => r.status === 200),
        'requests for a deleted tag served',
      ).toHaveLength(0);
      const above: string[] = [];
      for (const r of lim) if (r.status === 200) above.push(...(await json<Ids>(r)).ids.filter((id) => Number(id) > 50));
      expect(above, 'IDs above the lowered maxLimit').toEqual([]);
      // The busy process: within the bound of a second after the change, no request without a token is served.
      await new Promise((r) => setTimeout(r, 1100));
      const hotBurst = await burst(200, () => fetch(`${b.url}/v1/ids/hot?count=1`));
      expect(hotBurst.filter((r) => r.status === 200)).toHaveLength(0);
    } finally {
      clearInterval(hot);
    }
  });
});

/** What a lossy Postgres failover does to a tag: its last `segments` commits vanish (ledger rows and counter). */
async function loseLastSegments(db: pg.Client, schema: string, bizTag: string, segments: number): Promise<void> {
  await db.query('BEGIN');
  const { rows } = await db.query<{ start_id: string }>(
    `SELECT start_id::text FROM ${schema}.idmint_ledger WHERE biz_tag = $1 ORDER BY start_id DESC LIMIT $2`,
    [bizTag, segments],
  );
  const from = rows.at(-1)?.start_id;
  if (from !== undefined) {
    await db.query(`DELETE FROM ${schema}.idmint_ledger WHERE biz_tag = $1 AND start_id >= $2`, [bizTag, from]);
    await db.query(`UPDATE ${schema}.idmint_segment SET max_id = $2 WHERE biz_tag = $1`, [bizTag, Number(from) - 1]);
  }
  await db.query('COMMIT');
}

function connectZk(connect: string): Promise<ZkClient> {
  const zk = zookeeper.createClient(connect, { sessionTimeout: 10_000 });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('ZooKeeper did not connect')), 10_000);
    zk.once('connected', () => {
      clearTimeout(timer);
      resolve(zk);
    });
    zk.connect();
  });
}

function getData(zk: ZkClient, path: string): Promise<string> {
  return new Promise((resolve, reject) =>
    zk.getData(path, (err: Error | null, data: Buffer | undefined) => (err ? reject(err) : resolve(data?.toString() ?? ''))),
  );
}

function setData(zk: ZkClient, path: string, data: string): Promise<void> {
  return new Promise((resolve, reject) => zk.setData(path, Buffer.from(data), -1, (err: Error | null) => (err ? reject(err) : resolve())));
}

function getChildren(zk: ZkClient, path: string): Promise<string[]> {
  return new Promise((resolve, reject) => zk.getChildren(path, (err: Error | null, children: string[]) => (err ? reject(err) : resolve(children))));
}
