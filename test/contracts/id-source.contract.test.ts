import { Redis } from 'ioredis';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES, isIdmintError, type IdmintError } from '../../src/core/errors.js';
import type { BizTag, IdSource } from '../../src/core/ports.js';
import { SHARDED_LAYOUT } from '../../src/core/sharded.js';
import { LocalBlockBuffer } from '../../src/dispenser/sources/local-buffer.js';
import { MemoryPool } from '../../src/dispenser/sources/memory.js';
import { segmentSource } from '../../src/dispenser/sources/segment.js';
import { ShardedSource } from '../../src/dispenser/sources/sharded.js';
import { createSnowflakeSource } from '../../src/dispenser/sources/snowflake.js';
import { UidSource } from '../../src/dispenser/sources/uid.js';
import { RedisCounterPool } from '../../src/pool/redis/counter-pool.js';
import { RedisListPool } from '../../src/pool/redis/list-pool.js';
import { defineScripts } from '../../src/pool/redis/scripts.js';
import { PostgresWorkerIdProvider } from '../../src/worker-id/postgres-provider.js';
import { StaticWorkerIdProvider } from '../../src/worker-id/static-provider.js';
import { storeWithDispenser, type DispensingStore } from '../support/store.js';
import { expectNoDuplicates } from '../support/unique.js';
import { testTag } from '../support/tags.js';

// One contract for every IdSource, each on the real servers it uses (Postgres, Redis): what the
// dispenser relies on whatever serves a tag.
//  - IDs are positive decimal strings, distinct across concurrent takes (invariant 1);
//  - a source that always fills (all but the Redis pools, which hand out what they hold) returns
//    exactly `count`; a Redis pool never more;
//  - IDs dropped by forget() are never handed out afterwards;
//  - failures are IdmintErrors with a known code.
const DECIMAL = /^[1-9][0-9]{0,18}$/;

interface Subject {
  source: IdSource;
  tag: BizTag;
  /** Whether take(count) always returns count IDs. */
  fills: boolean;
  /** Puts IDs in a pool that only hands out what it holds. */
  feed?: (n: number) => Promise<void>;
  close: () => Promise<void>;
}

let ts: DispensingStore;
let redis: Redis;
let run = 0;

const tag = (bizTag: string, overrides: Partial<BizTag> = {}): BizTag => testTag(bizTag, { step: 500, fallback: 'error', ...overrides });

async function segmentTag(mode: BizTag['mode'] = 'segment', shards = 1): Promise<BizTag> {
  const bizTag = `c${++run}-${Math.random().toString(36).slice(2, 8)}`;
  await ts.store.createBiz({ bizTag, mode, shards, step: 500, fallback: 'error' });
  return tag(bizTag, { mode, shards });
}

const subjects: Record<string, () => Promise<Subject>> = {
  memory: async () => {
    const source = new MemoryPool({ allocator: ts.store });
    return { source, tag: await segmentTag(), fills: true, close: () => source.close() };
  },
  segment: async () => {
    const source = segmentSource(ts.store);
    return { source, tag: await segmentTag(), fills: true, close: () => source.close() };
  },
  'redis-list': async () => redisSubject(RedisListPool),
  'redis-counter': async () => redisSubject(RedisCounterPool),
  // An api process's local buffer in front of the counter pool (IDMINT_LOCAL_BUFFER).
  'redis-counter + local buffer': async () => {
    const subject = await redisSubject(RedisCounterPool);
    return { ...subject, source: new LocalBlockBuffer(subject.source as RedisCounterPool, 64) };
  },
  snowflake: async () => {
    const source = await createSnowflakeSource({ provider: new StaticWorkerIdProvider(7) });
    return { source, tag: tag('flake', { mode: 'snowflake' }), fills: true, close: () => source.close() };
  },
  uid: async () => {
    const source = new UidSource({ provider: new PostgresWorkerIdProvider({ db: ts.db, host: 'contract', port: 1 }) });
    return { source, tag: tag('uids', { mode: 'uid' }), fills: true, close: () => source.close() };
  },
  sharded: async () => {
    const memory = new MemoryPool({ allocator: ts.store });
    return { source: new ShardedSource(memory, SHARDED_LAYOUT, 3), tag: await segmentTag('sharded', 4), fills: true, close: () => memory.close() };
  },
};

async function redisSubject(Pool: typeof RedisListPool | typeof RedisCounterPool): Promise<Subject> {
  const t = await segmentTag();
  const source = new Pool({ redis, keyPrefix: `contract-${run}-${Math.random().toString(36).slice(2, 8)}:` });
  const feed = async (n: number): Promise<void> => {
    for (let left = n; left > 0;) {
      const segment = await ts.store.allocate(t.bizTag, Math.min(left, 5000));
      await source.push(segment);
      left -= segment.end - segment.start + 1;
    }
  };
  return { source, tag: { ...t, pool: source.kind }, fills: false, feed, close: async () => undefined };
}

beforeAll(async () => {
  ts = await storeWithDispenser();
  redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  defineScripts(redis);
});

afterAll(async () => {
  await redis?.quit();
  await ts?.close();
});

describe.each(Object.keys(subjects))('IdSource contract: %s', (name) => {
  let s: Subject;
  beforeAll(async () => {
    s = await subjects[name]!();
  });
  afterAll(async () => s?.close());

  it('concurrent takes hand out distinct positive decimal IDs, exactly count where the source fills', async () => {
    // Single-ID takes often: several sources have a fast path for them.
    const count = fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 400 }));
    await fc.assert(
      fc.asyncProperty(fc.array(count, { minLength: 1, maxLength: 24 }), async (counts) => {
        await s.feed?.(counts.reduce((a, b) => a + b, 0));
        const answers = await Promise.all(counts.map((n) => s.source.take(s.tag, n)));
        const ids = answers.flat();
        answers.forEach((a, i) => (s.fills ? expect(a).toHaveLength(counts[i]!) : expect(a.length).toBeLessThanOrEqual(counts[i]!)));
        for (const id of ids) expect(id).toMatch(DECIMAL);
        seen.push(...ids);
      }),
      { numRuns: 15 },
    );
    expectNoDuplicates(seen);
  });

  it('takeBlocks, where a source has it, hands out disjoint non-empty blocks of at most count IDs, distinct from its lists', async (ctx) => {
    const takeBlocks = s.source.takeBlocks?.bind(s.source);
    if (!takeBlocks) return ctx.skip(`${name} has no takeBlocks: its IDs are not contiguous`);
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 1, max: 400 }), { minLength: 1, maxLength: 12 }), async (counts) => {
        await s.feed?.(counts.reduce((a, b) => a + b, 0));
        const answers = await Promise.all(counts.map((n) => takeBlocks(s.tag, n)));
        answers.forEach((blocks, i) => {
          const size = blocks.reduce((n, b) => n + b.end - b.start + 1, 0);
          for (const b of blocks) expect(b.start >= 1 && b.start <= b.end && Number.isSafeInteger(b.end)).toBe(true);
          if (s.fills) expect(size).toBe(counts[i]);
          else expect(size).toBeLessThanOrEqual(counts[i]!);
          for (const b of blocks) for (let id = b.start; id <= b.end; id++) seen.push(String(id));
        });
      }),
      { numRuns: 10 },
    );
    expectNoDuplicates(seen);
  });

  it('never hands out again what forget() dropped', async () => {
    await s.feed?.(2000);
    const before = await s.source.take(s.tag, 100);
    await s.source.forget?.(s.tag.bizTag);
    await s.feed?.(2000);
    const after = await s.source.take(s.tag, 1000);
    const all = [...seen, ...before, ...after];
    expectNoDuplicates(all);
  });

  it('answers a tag it has nothing for with an IdmintError of a known code, or (a pool) with no IDs', async (ctx) => {
    if (name === 'snowflake' || name === 'uid') return ctx.skip('time-based: any tag name is served, there is no limit to run into');
    const ghost = { ...s.tag, bizTag: `ghost-${name}-${Math.random().toString(36).slice(2, 8)}` };
    const outcome = await s.source.take(ghost, 5).then(
      (ids) => ({ ids }),
      (err: unknown) => ({ err }),
    );
    if ('err' in outcome) {
      expect(isIdmintError(outcome.err), String(outcome.err)).toBe(true);
      expect(Object.keys(ERROR_CODES)).toContain((outcome.err as IdmintError).code);
    } else {
      // A source that fills (segments) must refuse a tag the store does not know; a pool may come back empty.
      expect(s.fills, `${name} served ${outcome.ids.length} IDs for a tag that does not exist`).toBe(false);
      expect(outcome.ids).toEqual([]);
    }
  });

  const seen: string[] = [];
});
