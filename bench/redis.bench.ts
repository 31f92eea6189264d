/**
 * Redis pools: IDs/s taken through the Lua scripts at batch sizes 1, 100, 1000 (list and
 * counter pools, 8 takes in flight), IDs/s pushed by one refill processor (Postgres segment +
 * push), and Redis memory per pooled ID. Runs against a private redis-server on a free port so
 * MEMORY USAGE and timings see nobody else's keys; Postgres is DATABASE_URL (or local 5432).
 */
import { spawn } from 'node:child_process';
import { Redis } from 'ioredis';
import type { BizTag } from '../src/core/ports.js';
import { RedisCounterPool } from '../src/pool/redis/counter-pool.js';
import { RedisListPool } from '../src/pool/redis/list-pool.js';
import { RedisPoolMeta } from '../src/pool/redis/meta.js';
import { createRefillProcessor } from '../src/refill/processor.js';
import { PostgresBizStore } from '../src/store/biz-store.js';
import { migrate } from '../src/store/migrations.js';
import { createPgDatabase } from '../src/store/pg.js';
import { perSecond, table, type Section } from './lib.js';
import { freePort } from '../test/support/spawn.js';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const IN_FLIGHT = 8;

function tagOf(bizTag: string, pool: BizTag['pool']): BizTag {
  return {
    bizTag,
    mode: 'segment',
    step: 1000,
    maxLimit: null,
    shards: 1,
    fallback: 'error',
    pool,
    format: 'decimal',
    description: '',
    createdAt: new Date(),
    updatedAt: new Date(),
  };
}

/** Takes `total` IDs in batches with IN_FLIGHT concurrent takes; returns IDs/s. */
async function takeRate(pool: RedisListPool | RedisCounterPool, tag: BizTag, batch: number, total: number): Promise<number> {
  let left = total;
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (left > 0) {
        left -= batch;
        const got = await pool.take(tag, batch);
        if (got.length !== batch) throw new Error(`pool ran dry: asked ${batch}, got ${got.length}`);
      }
    }),
  );
  return total / (Number(process.hrtime.bigint() - t0) / 1e9);
}

export async function run(): Promise<Section> {
  const port = await freePort();
  const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  const redis = new Redis(`redis://127.0.0.1:${port}`, { retryStrategy: () => 50 });
  redis.on('error', () => {});
  const db = createPgDatabase({ connectionString: DATABASE_URL, schema: `bench_redis_${process.pid}` });
  try {
    for (let i = 0; i < 100 && (await redis.ping().catch(() => '')) !== 'PONG'; i++) await new Promise((r) => setTimeout(r, 50));
    const rows: Array<Array<string | number>> = [];
    // Warm-up: JIT, script cache and connection, so the first row is not penalised.
    const warm = new RedisListPool({ redis });
    await warm.push({ bizTag: 'warm', shard: 0, start: 1, end: 400_000 });
    await takeRate(warm, tagOf('warm', 'redis-list'), 100, 400_000);
    for (const fence of [true, false]) {
      const list = new RedisListPool({ redis, fence });
      const counter = new RedisCounterPool({ redis, fence });
      for (const batch of [1, 100, 1000]) {
        const total = batch === 1 ? 40_000 : batch === 100 ? 1_000_000 : 2_000_000;
        const listTag = tagOf(`list-${batch}-${fence}`, 'redis-list');
        for (let s = 1; s <= total; s += 500_000) await list.push({ bizTag: listTag.bizTag, shard: 0, start: s, end: Math.min(s + 499_999, total) });
        const counterTag = tagOf(`counter-${batch}-${fence}`, 'redis-counter');
        for (let s = 1; s <= total; s += 10_000) await counter.push({ bizTag: counterTag.bizTag, shard: 0, start: s, end: s + 9_999 });
        rows.push([
          batch,
          fence ? 'on' : 'off',
          perSecond(await takeRate(list, listTag, batch, total)),
          perSecond(await takeRate(counter, counterTag, batch, total)),
        ]);
        await redis.unlink(`idmint:{${listTag.bizTag}}:ids`, `idmint:{${counterTag.bizTag}}:ranges`);
      }
    }

    // One refill processor topping a list pool up from empty to 1,000,000 IDs: allocate + push.
    await migrate(db);
    const store = new PostgresBizStore(db, { owner: 'bench' });
    const bizTag = `bench-${Date.now().toString(36)}`;
    await store.createBiz({ bizTag, step: 1000 });
    const refillRows: Array<Array<string | number>> = [];
    for (const maxSegment of [10_000, 100_000]) {
      await redis.del(`idmint:{${bizTag}}:ids`);
      const pool = new RedisListPool({ redis });
      const processor = createRefillProcessor({
        store,
        sinks: { 'redis-list': pool },
        meta: new RedisPoolMeta({ redis }),
        minDepth: 1_000_000,
        maxDepth: 1_000_000,
        maxSegment,
      });
      const t0 = process.hrtime.bigint();
      const outcome = await processor.refill(bizTag, 0, 'manual');
      const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
      const pushed = outcome.status === 'pushed' ? outcome.segments.reduce((n, s) => n + s.end - s.start + 1, 0) : 0;
      refillRows.push([
        maxSegment.toLocaleString('en'),
        outcome.status === 'pushed' ? outcome.segments.length : 0,
        pushed.toLocaleString('en'),
        perSecond(pushed / seconds),
      ]);
    }

    // Memory per pooled ID: 100,000 IDs, realistic 10-digit values.
    const memList = new RedisListPool({ redis });
    const memCounter = new RedisCounterPool({ redis });
    const base = 4_000_000_001;
    await memList.push({ bizTag: 'mem-list', shard: 0, start: base, end: base + 99_999 });
    for (let s = base; s < base + 100_000; s += 1000) await memCounter.push({ bizTag: 'mem-counter', shard: 0, start: s, end: s + 999 });
    const usage = async (key: string) => Number((await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);
    const listBytes = await usage('idmint:{mem-list}:ids');
    const counterBytes = (await usage('idmint:{mem-counter}:counter')) + (await usage('idmint:{mem-counter}:ranges'));
    const counterOneRange = new RedisCounterPool({ redis });
    await counterOneRange.push({ bizTag: 'mem-counter1', shard: 0, start: base, end: base + 99_999 });
    const counterOneBytes = (await usage('idmint:{mem-counter1}:counter')) + (await usage('idmint:{mem-counter1}:ranges'));
    await store.close();
    await db.query(`DROP SCHEMA IF EXISTS bench_redis_${process.pid} CASCADE`);

    return {
      title: 'Redis pools (list and counter), refill push rate, memory per ID',
      body: [
        `Takes through the Lua scripts, ${IN_FLIGHT} takes in flight on one ioredis connection, private redis-server (7.x) on loopback. ` +
          '"fence" is the run_id and replication-id check (INFO inside the script) that drops pools restored from an older snapshot or left by a failover.',
        '',
        table(['batch', 'fence', 'list pool IDs/s', 'counter pool IDs/s'], rows),
        '',
        'One refill processor filling an empty list pool to 1,000,000 IDs (Postgres segment allocation + Lua RPUSH in 10,000-ID chunks):',
        '',
        table(['max segment', 'segments', 'IDs pushed', 'IDs/s'], refillRows),
        '',
        'Redis memory (MEMORY USAGE ... SAMPLES 0) for 100,000 pooled 10-digit IDs:',
        '',
        table(
          ['pool', 'bytes', 'bytes per ID'],
          [
            ['list (one entry per ID)', listBytes.toLocaleString('en'), (listBytes / 100_000).toFixed(2)],
            ['counter, 100 ranges of 1,000', counterBytes.toLocaleString('en'), (counterBytes / 100_000).toFixed(4)],
            ['counter, 1 range of 100,000', counterOneBytes.toLocaleString('en'), (counterOneBytes / 100_000).toFixed(4)],
          ],
        ),
      ].join('\n'),
    };
  } finally {
    redis.disconnect();
    await db.close();
    server.kill('SIGKILL');
  }
}
