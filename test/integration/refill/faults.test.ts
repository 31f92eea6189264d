import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import type { PoolSink, Segment } from '../../../src/core/ports.js';
import { outsideLedger, runTakers, startHarness, type Harness } from './helpers.js';
import { freshStore, type TestStore } from '../../support/store.js';
import { uid } from '../../support/names.js';
import { expectNoDuplicates } from '../../support/unique.js';
import { startPrivateServer, type PrivateServer } from '../../support/servers.js';
import { sleep, until } from '../../support/poll.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const REFILL_SETTINGS = { minDepth: 5000, maxDepth: 40_000, poolSeconds: 1, maxSegment: 10_000 };

describe('refill faults, each ending with the zero-duplicate check (private redis-server, real Postgres, BullMQ)', () => {
  let store: TestStore | undefined;
  let harness: Harness | undefined;
  let server: PrivateServer | undefined;
  const children: ChildProcess[] = [];

  afterEach(async () => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await harness?.close();
    await store?.close();
    await server?.close();
    harness = undefined;
    store = undefined;
    server = undefined;
  });

  async function setUp(
    kind: 'redis-list' | 'redis-counter' = 'redis-list',
    extra: Parameters<typeof startHarness>[0] extends infer O ? Partial<O> : never = {},
  ) {
    server = await startPrivateServer('redis');
    store = await freshStore();
    const bizTag = `fault-${uid()}`;
    const tag = await store.store.createBiz({ bizTag, step: 1000, pool: kind });
    harness = await startHarness({ redisUrl: server.url, store: store.store, kind, processor: REFILL_SETTINGS, ...extra });
    return { tag, bizTag, st: store, h: harness, srv: server };
  }

  async function expectClean(st: TestStore, bizTag: string, ids: Float64Array, total: number) {
    expect(ids.length).toBe(total);
    expectNoDuplicates(ids);
    expect(outsideLedger(ids, await st.ledger(bizTag))).toEqual([]);
  }

  it.each(['redis-list', 'redis-counter'] as const)('%s: FLUSHALL twice mid-run', async (kind) => {
    const { tag, bizTag, st, h } = await setUp(kind);
    const total = 200_000;
    const flushAt = [60_000, 130_000];
    let flushes = 0;
    const { ids } = await runTakers({
      source: h.pool,
      tag,
      total,
      takers: 16,
      batch: 200,
      onProgress: async (n) => {
        if (flushes < flushAt.length && n >= flushAt[flushes]!) {
          flushes++;
          await h.redis.flushall();
        }
      },
    });
    expect(flushes).toBe(2);
    await expectClean(st, bizTag, ids, total);
  });

  it.each(['redis-list', 'redis-counter'] as const)('%s: Redis killed and restarted empty mid-run', async (kind) => {
    const { tag, bizTag, st, h, srv } = await setUp(kind);
    const total = 150_000;
    let restarted = false;
    // Everything goes through the logger: BullMQ printed each connection error's stack to stderr
    // (85 in this test) from a Queue without an 'error' listener.
    const printed = vi.spyOn(console, 'error');
    onTestFinished(() => printed.mockRestore());
    // Killed by its pid at once: through infra.sh the kill took long enough on a loaded machine
    // for the other takers to collect every remaining ID before Redis was down.
    const pid = await srv.pid();
    const { ids, notReady } = await runTakers({
      source: h.pool,
      tag,
      total,
      takers: 16,
      batch: 200,
      onProgress: async (n, live) => {
        if (!restarted && n >= 50_000) {
          restarted = true;
          const before = live.notReady;
          process.kill(pid, 'SIGKILL');
          // Down until the other takers' takes have failed over (NOT_READY), as the dispenser's would.
          await until('a take to fail NOT_READY while Redis is down', () => live.notReady > before, { timeoutMs: 20_000 });
          await srv.start();
        }
      },
    });
    expect(restarted).toBe(true);
    expect(notReady).toBeGreaterThan(0);
    await expectClean(st, bizTag, ids, total);
    expect(printed.mock.calls.map((c) => String(c[0]).slice(0, 120))).toEqual([]);
  });

  it.each(['redis-list', 'redis-counter'] as const)('%s: Redis killed and restarted from an older snapshot that still holds handed-out IDs', async (kind) => {
    const { tag, bizTag, st, h, srv } = await setUp(kind);
    const total = 150_000;
    let saved = false;
    let restarted = false;
    const { ids } = await runTakers({
      source: h.pool,
      tag,
      total,
      takers: 16,
      batch: 200,
      onProgress: async (n) => {
        if (!saved && n >= 30_000) {
          saved = true;
          await h.redis.save();
        } else if (saved && !restarted && n >= 60_000) {
          restarted = true;
          await srv.kill();
          await sleep(300); // Redis stays down a while: takes in this window fail over
          await srv.start();
        }
      },
    });
    expect(restarted).toBe(true);
    await expectClean(st, bizTag, ids, total);
  });

  it('a refill job retried after a failed push takes a new segment; the failed one is never served', async () => {
    let failures = 0;
    const { tag, bizTag, st, h } = await setUp('redis-list', {
      sinks: (pool) => {
        const flaky: PoolSink = {
          kind: pool.kind,
          depth: (b, s) => pool.depth(b, s),
          remove: (b) => pool.remove(b),
          push: async (segment: Segment) => {
            // The second segment ever pushed fails once, after it was allocated.
            if (failures === 0 && segment.start > 1) {
              failures++;
              throw new Error('injected push failure');
            }
            await pool.push(segment);
          },
        };
        return { [pool.kind]: flaky };
      },
    });
    const total = 60_000;
    const { ids } = await runTakers({ source: h.pool, tag, total, takers: 16, batch: 200 });
    expect(failures).toBe(1);
    await expectClean(st, bizTag, ids, total);
    // Exactly one ledger segment was allocated but never served: the failed attempt's.
    const ledger = await st.ledger(bizTag);
    const served = new Set(ids);
    const unserved = ledger.filter((s) => !served.has(s.start) && !served.has(s.end));
    expect(unserved.length).toBeGreaterThanOrEqual(1);
    const retried = (await h.queue.queue.getJobs(['completed'], 0, 1000)).filter((j) => j.name === 'refill' && j.attemptsMade >= 1 && j.failedReason);
    expect(retried.map((j) => j.failedReason)).toContain('injected push failure');
  });

  it('a refill worker killed with SIGKILL between allocating a segment and pushing it', async () => {
    const { tag, bizTag, st, h, srv } = await setUp('redis-list', { worker: false });
    const spawnWorker = (pauseMs: number) => {
      const child = spawn(process.execPath, ['--import', 'tsx', 'workers/refill.ts'], {
        cwd: ROOT,
        env: {
          ...process.env,
          REDIS_URL: srv.url,
          DATABASE_URL: st.url,
          IDMINT_REFILL_QUEUE: h.queueName,
          IDMINT_POOL_KEY_PREFIX: h.keyPrefix,
          IDMINT_POOL_MIN_DEPTH: String(REFILL_SETTINGS.minDepth),
          IDMINT_POOL_MAX_DEPTH: String(REFILL_SETTINGS.maxDepth),
          IDMINT_POOL_SECONDS: '1',
          IDMINT_REFILL_LOCK_MS: '1000',
          IDMINT_REFILL_EVERY_MS: '600000',
          IDMINT_REFILL_PAUSE_AFTER_ALLOCATE_MS: String(pauseMs),
          LOG_LEVEL: 'info',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      children.push(child);
      let out = '';
      child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
      return { child, output: () => out };
    };

    const first = spawnWorker(600_000);
    const total = 50_000;
    const taking = runTakers({ source: h.pool, tag, total, takers: 16, batch: 200 });
    // Wait until the first worker holds a fresh segment it has not pushed.
    await until('the first worker to allocate a segment', () => first.output().includes('segment allocated for refill'), { detail: first.output });
    const [killed] = await st.ledger(bizTag);
    expect(killed).toBeDefined();
    first.child.kill('SIGKILL');
    await new Promise((r) => first.child.once('exit', r));

    spawnWorker(0);
    const { ids } = await taking;
    await expectClean(st, bizTag, ids, total);
    expect(ids.filter((id) => id >= killed!.start && id <= killed!.end)).toHaveLength(0);
    expect((await st.ledger(bizTag)).length).toBeGreaterThan(1);
  });
});
