/**
 * Pool and refill harnesses: concurrent takers, the ledger check (every ID inside a segment the
 * ledger recorded), and a pool + queue + worker isolated by a random key prefix and queue name.
 * The generic helpers (store, servers, polls, duplicate checks) are in test/support.
 */
import { Redis } from 'ioredis';
import { isIdmintError } from '../../../src/core/errors.js';
import { uid } from '../../support/names.js';
import { sleep } from '../../support/poll.js';
import type { BizStore, BizTag, IdSource } from '../../../src/core/ports.js';
import { RedisCounterPool } from '../../../src/pool/redis/counter-pool.js';
import { RedisListPool } from '../../../src/pool/redis/list-pool.js';
import { RedisPoolMeta } from '../../../src/pool/redis/meta.js';
import { createRefillProcessor, type RefillProcessor, type RefillProcessorOptions } from '../../../src/refill/processor.js';
import { RefillQueue } from '../../../src/refill/queue.js';
import { RefillWorker, type RefillWorkerOptions } from '../../../src/refill/worker.js';

export interface TakersResult {
  ids: Float64Array;
  /** Takes that failed with NOT_READY (Redis down) and were retried. */
  notReady: number;
  /** Takes that came back short (pool ran dry) and were retried. */
  short: number;
  /** The most takes in flight at once: how concurrent the takers really were. */
  maxInFlight: number;
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
  /** Called after each take; `live` counts what has happened so far. */
  onProgress?: (taken: number, live: { readonly notReady: number }) => void | Promise<void>;
  giveUpMs?: number;
}): Promise<TakersResult> {
  const ids = new Float64Array(opts.total);
  let n = 0;
  const live = { notReady: 0 };
  let short = 0;
  const giveUpAt = Date.now() + (opts.giveUpMs ?? 120_000);
  // IDs asked for but not yet back: keeps concurrent loops from asking for more than `total`.
  let reserved = 0;
  let inFlight = 0;
  let maxInFlight = 0;
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
      maxInFlight = Math.max(maxInFlight, ++inFlight);
      try {
        got = await opts.source.take(opts.tag, want);
      } catch (err) {
        reserved -= want;
        if (isIdmintError(err) && err.code === 'NOT_READY') {
          live.notReady++;
          await sleep(20);
          continue;
        }
        throw err;
      } finally {
        inFlight--;
      }
      reserved -= want;
      if (got.length > want) throw new Error(`asked for ${want} IDs, got ${got.length}`);
      for (const id of got) ids[n++] = Number(id);
      if (got.length < want) {
        short++;
        await sleep(5);
      }
      await opts.onProgress?.(n, live);
    }
  };
  await Promise.all(Array.from({ length: opts.takers }, loop));
  return { ids: ids.subarray(0, n), notReady: live.notReady, short, maxInFlight };
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
    worker = new RefillWorker({
      connection: workerRedis,
      processor,
      name: queueName,
      concurrency: 2,
      lockDurationMs: 5000,
      stalledIntervalMs: 2000,
      ...opts.worker_,
    });
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

export { outsideLedger } from '../../support/unique.js';
