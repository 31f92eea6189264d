/**
 * Helpers for pool and refill tests: a fresh Postgres schema per test, a private redis-server
 * on a random port (for FLUSHALL and restarts), takers, and the two checks every ID-handing
 * test ends with: no duplicates, and every ID inside a segment of the ledger.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { isIdmintError } from '../../../src/core/errors.js';
import type { BizStore, BizTag, IdSource } from '../../../src/core/ports.js';
import { RedisCounterPool } from '../../../src/pool/redis/counter-pool.js';
import { RedisListPool } from '../../../src/pool/redis/list-pool.js';
import { RedisPoolMeta } from '../../../src/pool/redis/meta.js';
import { createRefillProcessor, type RefillProcessor, type RefillProcessorOptions } from '../../../src/refill/processor.js';
import { RefillQueue } from '../../../src/refill/queue.js';
import { RefillWorker, type RefillWorkerOptions } from '../../../src/refill/worker.js';
import { PostgresBizStore } from '../../../src/store/biz-store.js';
import type { Database } from '../../../src/store/db.js';
import { migrate } from '../../../src/store/migrations.js';
import { createPgDatabase } from '../../../src/store/pg.js';
import { freePort } from '../../helpers/spawn-server.js';

export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

export const uid = (): string => Math.random().toString(36).slice(2, 10);
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export interface TestStore {
  readonly db: Database;
  readonly store: BizStore;
  readonly schema: string;
  /** DATABASE_URL whose connections use this schema (for spawned workers). */
  readonly url: string;
  ledger(bizTag: string): Promise<Array<{ start: number; end: number }>>;
  close(): Promise<void>;
}

export async function freshStore(): Promise<TestStore> {
  const schema = `t_refill_${uid()}`;
  const db = createPgDatabase({ connectionString: DATABASE_URL, schema });
  await migrate(db);
  const store = new PostgresBizStore(db, { owner: 'test' });
  const u = new URL(DATABASE_URL);
  u.searchParams.set('options', `-c search_path=${schema}`);
  return {
    db,
    store,
    schema,
    url: u.toString(),
    async ledger(bizTag) {
      const { rows } = await db.query<{ start_id: bigint; end_id: bigint }>(
        'SELECT start_id, end_id FROM idmint_ledger WHERE biz_tag = $1 ORDER BY start_id',
        [bizTag],
      );
      return rows.map((r) => ({ start: Number(r.start_id), end: Number(r.end_id) }));
    },
    async close() {
      await store.close();
      await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await db.close();
    },
  };
}

export { freePort };

/** A redis-server of our own: FLUSHALL, kill and restart touch nobody else's data. */
export class PrivateRedis {
  readonly dir = mkdtempSync(join(tmpdir(), 'idmint-redis-'));
  private proc: ChildProcess | undefined;

  private constructor(readonly port: number, private readonly persist: boolean) {}

  static async start(options: { persist?: boolean } = {}): Promise<PrivateRedis> {
    const r = new PrivateRedis(await freePort(), options.persist ?? false);
    await r.startProcess();
    return r;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  private async startProcess(): Promise<void> {
    // persist: an RDB file only written by explicit SAVE, so a test controls what a restart restores.
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir, '--dbfilename', 'dump.rdb'];
    this.proc = spawn('redis-server', args, { stdio: 'ignore' });
    const probe = new Redis(this.url, { lazyConnect: true, retryStrategy: () => 50, maxRetriesPerRequest: 1 });
    probe.on('error', () => {}); // refused until the server listens
    for (let i = 0; i < 200; i++) {
      try {
        if (probe.status === 'wait') await probe.connect();
        if ((await probe.ping()) === 'PONG') break;
      } catch {
        await sleep(25);
      }
    }
    probe.disconnect();
    if (!this.persist) rmSync(join(this.dir, 'dump.rdb'), { force: true });
  }

  /** Kills the server (no save on the way down) and starts it again on the same port. */
  async restart(downMs = 300): Promise<void> {
    await this.kill();
    await sleep(downMs);
    await this.startProcess();
  }

  async kill(): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      p.once('exit', () => resolve());
      p.kill('SIGKILL');
    });
  }

  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export function makeTag(bizTag: string, overrides: Partial<BizTag> = {}): BizTag {
  return {
    bizTag,
    mode: 'segment',
    step: 1000,
    maxLimit: null,
    shards: 1,
    fallback: 'error',
    pool: 'redis-list',
    format: 'decimal',
    description: '',
    createdAt: new Date(),
    updatedAt: new Date(),
    ...overrides,
  };
}

export interface TakersResult {
  ids: Float64Array;
  /** Takes that failed with NOT_READY (Redis down) and were retried. */
  notReady: number;
  /** Takes that came back short (pool ran dry) and were retried. */
  short: number;
}

/**
 * `takers` concurrent loops taking `batch` IDs at a time until `total` IDs are collected.
 * Short takes and NOT_READY are waited out, as the dispenser's fallback would bridge them.
 */
export async function runTakers(opts: {
  source: IdSource;
  tag: BizTag;
  total: number;
  takers: number;
  batch: number;
  onProgress?: (taken: number) => void | Promise<void>;
  giveUpMs?: number;
}): Promise<TakersResult> {
  const ids = new Float64Array(opts.total);
  let n = 0;
  let notReady = 0;
  let short = 0;
  const giveUpAt = Date.now() + (opts.giveUpMs ?? 120_000);
  // IDs asked for but not yet back: keeps concurrent loops from asking for more than `total`.
  let reserved = 0;
  const loop = async () => {
    while (n < opts.total) {
      if (Date.now() > giveUpAt) throw new Error(`takers gave up with ${n}/${opts.total} IDs`);
      const want = Math.min(opts.batch, opts.total - n - reserved);
      if (want <= 0) {
        await sleep(2);
        continue;
      }
      reserved += want;
      let got: string[];
      try {
        got = await opts.source.take(opts.tag, want);
      } catch (err) {
        reserved -= want;
        if (isIdmintError(err) && err.code === 'NOT_READY') {
          notReady++;
          await sleep(20);
          continue;
        }
        throw err;
      }
      reserved -= want;
      if (got.length > want) throw new Error(`asked for ${want} IDs, got ${got.length}`);
      for (const id of got) ids[n++] = Number(id);
      if (got.length < want) {
        short++;
        await sleep(5);
      }
      await opts.onProgress?.(n);
    }
  };
  await Promise.all(Array.from({ length: opts.takers }, loop));
  return { ids: ids.subarray(0, n), notReady, short };
}

/** Sorted copy; returns the first duplicate, if any. */
export function findDuplicate(ids: Float64Array): number | undefined {
  const sorted = Float64Array.from(ids).sort();
  for (let i = 1; i < sorted.length; i++) if (sorted[i] === sorted[i - 1]) return sorted[i];
  return undefined;
}

/** IDs that lie in no ledger segment (should be none). */
export function outsideLedger(ids: Float64Array, ledger: Array<{ start: number; end: number }>): number[] {
  const segs = [...ledger].sort((a, b) => a.start - b.start);
  const bad: number[] = [];
  for (const id of ids) {
    let lo = 0;
    let hi = segs.length - 1;
    let found = false;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const s = segs[mid]!;
      if (id < s.start) hi = mid - 1;
      else if (id > s.end) lo = mid + 1;
      else {
        found = true;
        break;
      }
    }
    if (!found) bad.push(id);
    if (bad.length > 10) break;
  }
  return bad;
}

export interface Harness {
  readonly redis: Redis;
  readonly pool: RedisListPool | RedisCounterPool;
  readonly meta: RedisPoolMeta;
  readonly queue: RefillQueue;
  readonly worker: RefillWorker | undefined;
  readonly processor: RefillProcessor;
  readonly keyPrefix: string;
  readonly queueName: string;
  close(): Promise<void>;
}

/** Pool + queue + (optionally) an in-process worker, isolated by a random key prefix and queue name. */
export async function startHarness(opts: {
  redisUrl: string;
  store: BizStore;
  kind?: 'redis-list' | 'redis-counter';
  worker?: boolean;
  processor?: Partial<RefillProcessorOptions>;
  worker_?: Partial<RefillWorkerOptions>;
  sinks?: (pool: RedisListPool | RedisCounterPool) => RefillProcessorOptions['sinks'];
  queueName?: string;
  keyPrefix?: string;
}): Promise<Harness> {
  const keyPrefix = opts.keyPrefix ?? `test-${uid()}:`;
  const queueName = opts.queueName ?? `refill-${uid()}`;
  const redis = new Redis(opts.redisUrl, { maxRetriesPerRequest: 1, retryStrategy: () => 50 });
  redis.on('error', () => {});
  const queueRedis = new Redis(opts.redisUrl, { maxRetriesPerRequest: null, retryStrategy: () => 50 });
  queueRedis.on('error', () => {});
  const queue = new RefillQueue({ connection: queueRedis, name: queueName, backoffMs: 50 });
  const Pool = (opts.kind ?? 'redis-list') === 'redis-list' ? RedisListPool : RedisCounterPool;
  const minDepth = opts.processor?.minDepth ?? 1000;
  const pool = new Pool({ redis, keyPrefix, refill: queue, minDepth, refillDebounceMs: 20 });
  const meta = new RedisPoolMeta({ redis, keyPrefix });
  const processor = createRefillProcessor({
    store: opts.store,
    sinks: opts.sinks ? opts.sinks(pool) : { [pool.kind]: pool },
    meta,
    trigger: queue,
    ...opts.processor,
  });
  let worker: RefillWorker | undefined;
  if (opts.worker ?? true) {
    const workerRedis = new Redis(opts.redisUrl, { maxRetriesPerRequest: null, retryStrategy: () => 50 });
    workerRedis.on('error', () => {});
    worker = new RefillWorker({ connection: workerRedis, processor, name: queueName, concurrency: 2, lockDurationMs: 5000, stalledIntervalMs: 2000, ...opts.worker_ });
    await worker.waitUntilReady();
    const w = worker;
    const close = w.close.bind(w);
    w.close = async (force?: boolean) => {
      await close(force);
      workerRedis.disconnect();
    };
  }
  return {
    redis,
    pool,
    meta,
    queue,
    worker,
    processor,
    keyPrefix,
    queueName,
    async close() {
      await worker?.close(true);
      await queue.queue.obliterate({ force: true }).catch(() => {});
      await queue.close();
      queueRedis.disconnect();
      redis.disconnect();
    },
  };
}
