import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdmintClient, createKafkaClient, isIdmintError, kafkaPoolTransport } from '../../src/client/index.js';
import { LEAF_LAYOUT } from '../../src/core/layout.js';
import { regionalWorkerIds } from '../../src/core/region.js';
import { idmint } from '../support/cli.js';
import { testKafka } from '../support/kafka.js';
import { sleep, until } from '../support/poll.js';
import { startPrivateServer, type PrivateServer } from '../support/servers.js';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';
import { expectDisjoint, expectNoDuplicates } from '../support/unique.js';
import { TEST_VERIFY_KEY } from '../support/signing.js';

// Several regions on one machine: region 1 on a Postgres and a Redis of its own (private servers
// from scripts/infra.sh), each region its own refill queue and Kafka namespace (request topic,
// pool topics, groups); Kafka and ZooKeeper shared (worker ids carry the region, fence marks have
// a path per region). Every path (HTTP IDs and blocks, Kafka request/reply, Kafka pool topics
// through the SDK) loaded in both regions at once, region 1 killed entirely (its servers and its process) and
// restarted, and a region of one turned into two with `idmint regions apply` under load.
const TOKEN = 'regions-admin-token';
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const run = Math.random().toString(36).slice(2, 10);
/** A deployment's Kafka namespace: its request topic, pool topics and groups. */
const namespaceOf = (name: string): string => `${name}-${run}`;
const STRIPE = 20_000;

function need(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: the e2e global setup starts the local servers`);
  return value;
}

const TAGS = [
  { bizTag: 'orders', step: 2000 },
  { bizTag: 'listed', step: 500, pool: 'redis-list' },
  { bizTag: 'flakes', mode: 'snowflake' },
  { bizTag: 'uids', mode: 'uid' },
  { bizTag: 'sharded', mode: 'sharded', shards: 2, step: 500 },
  { bizTag: 'streamed', step: 5000, pool: 'kafka' },
];
/** Segment tags: every ID below 2^53 lies in its region's stripes. */
const SEGMENT_TAGS = new Set(['orders', 'listed', 'streamed']);

interface Collected {
  ids: Map<string, string[]>;
  /** Each region's segment-tag IDs (SEGMENT_TAGS): every one must lie in its region's stripes. */
  segmentIds: Array<{ region: number; id: string }>;
  /** Each region's Snowflake tag IDs: every one's worker id names its region. */
  flakeIds: Array<{ region: number; id: string }>;
  blocks: Array<{ start: number; end: number; region: number }>;
  /** IDs each region's SDK took from its Kafka pool topic. */
  pooled: number[];
  errors: string[];
}

/**
 * Clients taking from one region until `running` says stop: every tag over HTTP, blocks, the
 * region's Kafka request topic, and its Kafka pool topic through the SDK (both in `namespace`).
 * An attempt that starts or fails while `tolerate()` (region 1 restarting) may fail.
 */
async function load(url: () => string, region: number, namespace: string, into: Collected, running: () => boolean, tolerate: () => boolean): Promise<void> {
  const keep = (bizTag: string, ids: readonly string[]): void => {
    into.ids.get(bizTag)!.push(...ids);
    if (SEGMENT_TAGS.has(bizTag)) for (const id of ids) into.segmentIds.push({ region, id });
    if (bizTag === 'flakes') for (const id of ids) into.flakeIds.push({ region, id });
  };
  const loop = async (what: string, once: () => Promise<void>, expected: (err: unknown) => boolean = () => false): Promise<void> => {
    while (running()) {
      const excused = tolerate();
      try {
        await once();
      } catch (err) {
        if (!excused && !tolerate() && !expected(err)) into.errors.push(`region ${region} ${what}: ${(err as Error).message}`);
        await sleep(50);
      }
    }
  };
  const json = async <T>(route: string): Promise<T> => {
    const response = await fetch(`${url()}${route}`);
    const body = (await response.json()) as T;
    if (!response.ok) throw new Error(`${response.status} ${JSON.stringify(body)}`);
    return body;
  };
  const count = (most: number): number => 1 + Math.floor(Math.random() * most);
  const kafka = testKafka(`regions-${region}`);
  const rpc = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, clientId: `regions-${region}`, namespace, timeoutMs: 15_000 });
  const pool = createIdmintClient({
    transport: kafkaPoolTransport({ verifyKey: TEST_VERIFY_KEY, kafka, namespace, takeTimeoutMs: 5000 }),
    batchSize: 100,
    timeoutMs: 30_000,
  });
  try {
    await Promise.all([
      ...TAGS.map((t) => loop(t.bizTag, async () => keep(t.bizTag, (await json<{ ids: string[] }>(`/v1/ids/${t.bizTag}?count=${count(40)}`)).ids))),
      loop('blocks', async () => {
        for (const b of (await json<{ blocks: Array<{ start: string; end: string }> }>(`/v1/blocks/orders?count=${count(3000)}`)).blocks)
          into.blocks.push({ start: Number(b.start), end: Number(b.end), region });
      }),
      // The rpc client's start (its reply topic and group) first, alone: a start that fails fails the test.
      rpc.start().then(() => loop('kafka request', async () => keep('orders', (await rpc.get('orders', count(40))).ids))),
      // A pool without a fallback answers POOL_EMPTY while its topic is dry (before the region's
      // first refill, or when takes outrun it) and NOT_READY before the topic exists.
      loop(
        'kafka pool',
        async () => {
          const ids = await pool.nextMany('streamed', 50);
          keep('streamed', ids.map(String));
          into.pooled[region] = (into.pooled[region] ?? 0) + ids.length;
          await sleep(2); // takes from buffered blocks resolve at once: leave the CPU to the other paths
        },
        (err) => isIdmintError(err) && (err.code === 'POOL_EMPTY' || err.code === 'NOT_READY'),
      ),
    ]);
  } finally {
    await Promise.all([rpc.close(), pool.close()]);
  }
}

/** Every ID of every tag unique across the regions; segment IDs (and blocks) in their region's stripes. */
function expectUnique(c: Collected): void {
  for (const [bizTag, ids] of c.ids) {
    expect(ids.length, bizTag).toBeGreaterThan(100);
    expectNoDuplicates(ids, `${bizTag} IDs across regions`);
  }
  const orderIds = c.ids
    .get('orders')!
    .filter((id) => BigInt(id) < 2n ** 53n)
    .map(Number);
  expectDisjoint([...c.blocks, ...orderIds.map((id) => ({ start: id, end: id }))], 'orders blocks and IDs across regions');
}

describe('two regions side by side (IDMINT_REGIONS=2)', () => {
  const schemas = [0, 1, 2, 3, 4].map((i) => `regions_${run}_${i}`);
  let db: pg.Client;
  // Region 1's own servers.
  let pg1: PrivateServer;
  let redis1: PrivateServer;
  const dirs: string[] = [];
  const servers: SpawnedServer[] = [];
  beforeAll(async () => {
    db = new pg.Client({ connectionString: need('DATABASE_URL') });
    await db.connect();
    [pg1, redis1] = await Promise.all([startPrivateServer('postgres'), startPrivateServer('redis')]);
  }, 120_000);
  afterAll(async () => {
    for (const s of servers) await s.stop('SIGKILL').catch(() => undefined);
    for (const schema of schemas) await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await db.end();
    await Promise.all([pg1?.close(), redis1?.close()]);
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  /** Region 1 (own: true) on its own Postgres and Redis; the others on the shared ones. */
  const envOf = (schema: string, name: string, region?: number, own = region === 1): Record<string, string> => {
    const dir = mkdtempSync(join(tmpdir(), `idmint-${name}-`));
    dirs.push(dir);
    return {
      DATABASE_URL: own ? pg1.url : need('DATABASE_URL'),
      IDMINT_PG_SCHEMA: schema,
      REDIS_URL: own ? redis1.url : need('REDIS_URL'),
      ZK_CONNECT: need('ZK_CONNECT'),
      KAFKA_BROKERS: need('KAFKA_BROKERS'),
      IDMINT_DATA_DIR: dir,
      IDMINT_ADMIN_TOKEN: TOKEN,
      IDMINT_POOL_KEY_PREFIX: `${name}${run}:`,
      IDMINT_REFILL_QUEUE: `${name}-${run}`,
      IDMINT_KAFKA_NAMESPACE: namespaceOf(name),
      // A killed responder's partitions move to its successor within this (the broker's minimum).
      IDMINT_KAFKA_SESSION_TIMEOUT_MS: '6000',
      ...(region === undefined ? {} : { IDMINT_REGIONS: '2', IDMINT_REGION: String(region), IDMINT_REGION_STRIPE: String(STRIPE) }),
    };
  };
  const createTags = async (url: string): Promise<void> => {
    for (const tag of TAGS) {
      const response = await fetch(`${url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify(tag) });
      expect(response.status, await response.clone().text()).toBe(201);
    }
  };
  const collected = (): Collected => ({ ids: new Map(TAGS.map((t) => [t.bizTag, []])), segmentIds: [], flakeIds: [], blocks: [], pooled: [], errors: [] });

  it('both regions loaded on every path at once, one killed and restarted: zero duplicates, every ID in its region', async () => {
    const envs = [envOf(schemas[0]!, 'rega', 0), envOf(schemas[1]!, 'regb', 1)];
    const [a, b] = [await spawnServer(envs[0]!), await spawnServer(envs[1]!)];
    servers.push(a, b);
    await createTags(a.url);
    // Region 1 takes region 0's tags with one command; a second run finds nothing to do.
    const synced = await idmint(['biz', 'sync', '--from', a.url, '--url', b.url, '--token', TOKEN]);
    expect(synced.code, synced.out).toBe(0);
    expect(synced.out.match(/: created/g)).toHaveLength(TAGS.length);
    const resynced = await idmint(['biz', 'sync', '--from', a.url, '--url', b.url, '--token', TOKEN]);
    expect(resynced.out.match(/: unchanged/g), resynced.out).toHaveLength(TAGS.length);
    const regionsOf = await Promise.all(
      [a, b].map(async (s) => (await (await fetch(`${s.url}/v1/regions`, { headers: admin })).json()) as { regions: number; region: number; stripe: number }),
    );
    expect(regionsOf).toEqual([
      expect.objectContaining({ regions: 2, region: 0, stripe: STRIPE }),
      expect.objectContaining({ regions: 2, region: 1, stripe: STRIPE }),
    ]);
    const urls = [a.url, b.url];
    const c = collected();
    let running = true;
    let restarting = false;
    const clients = [0, 1].map((region) =>
      load(
        () => urls[region]!,
        region,
        namespaceOf(['rega', 'regb'][region]!),
        c,
        () => running,
        () => region === 1 && restarting,
      ),
    );
    await sleep(4000);
    // Region 1 dies entirely (its process, its Postgres, its Redis) and comes back on the same settings.
    restarting = true;
    await Promise.all([b.stop('SIGKILL'), pg1.kill(), redis1.kill()]);
    await sleep(1000);
    await Promise.all([pg1.start(), redis1.start()]);
    const b2 = await spawnServer({ ...envs[1]!, IDMINT_PORT: new URL(b.url).port });
    servers.push(b2);
    restarting = false;
    await sleep(4000);
    running = false;
    await Promise.all(clients);
    expect(c.errors.slice(0, 5)).toEqual([]);
    expectUnique(c);
    // Segment IDs and blocks lie in their region's stripes; Snowflake and uid IDs name their region.
    for (const block of c.blocks) expect(Math.floor((block.start - 1) / STRIPE) % 2, JSON.stringify(block)).toBe(block.region);
    // Every segment ID, not a sample: below 2^53 it lies in its region's stripes (above, a Snowflake fallback ID).
    const misplaced = c.segmentIds.filter(({ region, id }) => BigInt(id) < 2n ** 53n && Math.floor((Number(id) - 1) / STRIPE) % 2 !== region);
    expect(misplaced.slice(0, 5)).toEqual([]);
    expect(c.segmentIds.length).toBeGreaterThan(1000);
    const workers = regionalWorkerIds({ regions: 2, region: 0 }, LEAF_LAYOUT.maxWorkerId);
    const elsewhere = c.flakeIds.filter(({ region, id }) => workers.regionOf(LEAF_LAYOUT.decode(BigInt(id)).worker) !== region);
    expect(elsewhere.slice(0, 5)).toEqual([]);
    expect(c.flakeIds.length).toBeGreaterThan(1000);
    // Each region's SDK took from its own pool topic (idmint.<namespace>.ids.streamed).
    expect(c.pooled[0], "IDs from region 0's Kafka pool").toBeGreaterThan(0);
    expect(c.pooled[1], "IDs from region 1's Kafka pool").toBeGreaterThan(0);
    const decoded = await Promise.all(
      [a.url, b2.url].map(async (url) => {
        const id = ((await (await fetch(`${url}/v1/ids/flakes?count=1`)).json()) as { ids: string[] }).ids[0]!;
        return ((await (await fetch(`${url}/v1/decode/${id}?bizTag=flakes`)).json()) as { region: number }).region;
      }),
    );
    expect(decoded).toEqual([0, 1]);
    const uidRegion = await (async () => {
      const id = ((await (await fetch(`${b2.url}/v1/ids/uids?count=1`)).json()) as { ids: string[] }).ids[0]!;
      return ((await (await fetch(`${b2.url}/v1/decode/${id}?bizTag=uids`)).json()) as { region: number }).region;
    })();
    expect(uidRegion).toBe(1);
    // A process whose settings differ from what its database recorded refuses, with one line.
    const wrongDir = mkdtempSync(join(tmpdir(), 'idmint-regwrong-'));
    dirs.push(wrongDir);
    const wrong = await idmint(['serve'], { ...envs[1]!, IDMINT_REGION: '0', IDMINT_PORT: '0', IDMINT_DATA_DIR: wrongDir });
    expect(wrong.code).toBe(1);
    expect(wrong.out).toMatch(
      /IDMINT_REGION=0 IDMINT_REGIONS=2 IDMINT_REGION_STRIPE=20000 differs from what this database recorded at its first start \(IDMINT_REGION=1/,
    );
    // A second deployment given IDMINT_REGION=1 by mistake: biz sync between them names it.
    const twin = await spawnServer(envOf(schemas[4]!, 'rege', 1, false));
    servers.push(twin);
    const clash = await idmint(['biz', 'sync', '--from', b2.url, '--url', twin.url, '--token', TOKEN]);
    expect(clash.code).toBe(1);
    expect(clash.out).toMatch(/are both region 1: two deployments given the same IDMINT_REGION hand out the same IDs/);
    const createEverywhere = await idmint(['biz', 'create', 'everywhere', '--regions', `${a.url},${b2.url}`, '--token', TOKEN]);
    expect(createEverywhere.code, createEverywhere.out).toBe(0);
    expect(createEverywhere.out).toContain(`${a.url}: {`);
    const refused = await idmint(['biz', 'create', 'nowhere', '--regions', `${b2.url},${twin.url}`, '--token', TOKEN]);
    expect(refused.out).toMatch(/both region 1/);
    console.log(
      `two regions: ${[...c.ids].map(([t, ids]) => `${t} ${ids.length}`).join(', ')}, ${c.blocks.length} blocks, from the Kafka pools ${c.pooled.join(' / ')}`,
    );
  });

  it('one region becomes two under load (idmint regions plan, apply, restart region 0, start region 1): zero duplicates', async () => {
    const env0 = envOf(schemas[2]!, 'regc');
    const single = await spawnServer(env0);
    servers.push(single);
    await createTags(single.url);
    const c = collected();
    const urls = [single.url, ''];
    let running = true;
    let restarting = false;
    const region0 = load(
      () => urls[0]!,
      0,
      namespaceOf('regc'),
      c,
      () => running,
      () => restarting,
    );
    await sleep(3000);
    // Each region's database by its URL: region 0 on the shared Postgres, region 1 on its own (one schema name on both).
    const flags = ['--regions', '2', '--stripe', String(STRIPE), '--from', need('DATABASE_URL'), '--to', pg1.url, '--schema', schemas[2]!];
    const dry = await idmint(['regions', 'plan', ...flags]);
    expect(dry.code, dry.out).toBe(0);
    expect(dry.out).toMatch(/orders: create, next ID above \d+/);
    // From the apply until its restart, the old process's worker id is full-width while the
    // database is a region: it refuses Snowflake and uid IDs (its segments follow the counters' split).
    restarting = true;
    const applied = await idmint(['regions', 'apply', ...flags]);
    expect(applied.code, applied.out).toBe(0);
    expect(applied.out).toMatch(/region 0: recorded, floors taken/);
    await until('the old process to refuse Snowflake IDs', async () => (await fetch(`${single.url}/v1/ids/flakes?count=1`)).status === 503, {
      timeoutMs: 10_000,
    });
    expect(await (await fetch(`${single.url}/v1/ids/uids?count=1`)).text()).toMatch(/IDMINT_REGIONS/);
    expect((await fetch(`${single.url}/v1/ids/orders?count=1`)).status).toBe(200);
    // Region 0's processes restart with the settings, then region 1 starts.
    await single.stop('SIGTERM');
    const zero = await spawnServer({
      ...env0,
      IDMINT_REGIONS: '2',
      IDMINT_REGION: '0',
      IDMINT_REGION_STRIPE: String(STRIPE),
      IDMINT_PORT: new URL(single.url).port,
    });
    servers.push(zero);
    restarting = false;
    const one = await spawnServer({ ...envOf(schemas[2]!, 'regd', 1) });
    servers.push(one);
    urls[1] = one.url;
    const region1 = load(
      () => urls[1]!,
      1,
      namespaceOf('regd'),
      c,
      () => running,
      () => false,
    );
    await sleep(4000);
    running = false;
    await Promise.all([region0, region1]);
    expect(c.errors.slice(0, 5)).toEqual([]);
    expectUnique(c);
    expect(c.blocks.filter((b) => b.region === 1).length).toBeGreaterThan(10);
    // Again, with the schema from IDMINT_PG_SCHEMA instead of --schema: the same databases, nothing to do.
    const again = await idmint(['regions', 'apply', ...flags.slice(0, -2)], { IDMINT_PG_SCHEMA: schemas[2]! });
    expect(again.code, again.out).toBe(0);
    expect(again.out).toMatch(/floors kept from the first run/);
    expect(again.out).not.toMatch(/created|raised/);
  });
});
