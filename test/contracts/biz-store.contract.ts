import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdmintError, SegmentExhaustedError } from '../../src/core/errors.js';
import type { Segment } from '../../src/core/ports.js';
import { MAX_SHARDS, MAX_STEP, migrate, MIGRATIONS, PostgresBizStore, PostgresSettings, WorkerNodeRepository, type Database } from '../../src/store/index.js';
import { expectNoDuplicates } from '../support/unique.js';

/** A backend under test: a fresh, unmigrated database and `handles` connections onto it. */
export interface StoreHarness {
  fresh(handles: number): Promise<{ handles: Database[]; dispose(): Promise<void> }>;
}

/** Where the measured allocation rates go, so the backend's test file can print them. */
export const rates: Record<string, number> = {};

const uniqueTag = (prefix: string): string => `${prefix}-${randomUUID().slice(0, 8)}`;

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(IdmintError);
    return (err as IdmintError).code;
  }
  throw new Error('expected a rejection');
}

/** The field a BAD_REQUEST names. */
async function fieldOf(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    expect(err).toMatchObject({ code: 'BAD_REQUEST' });
    return (err as IdmintError).details.field;
  }
  throw new Error('expected a rejection');
}

/** Sorted ranges must tile [1, end] with no overlap and no gap. */
function expectContiguous(segments: readonly Segment[], from = 1): number {
  const sorted = [...segments].sort((a, b) => a.start - b.start);
  let next = from;
  for (const s of sorted) {
    expect(s.start).toBe(next);
    expect(s.end).toBeGreaterThanOrEqual(s.start);
    next = s.end + 1;
  }
  return next - 1;
}

/** The contract every BizStore backend meets; run once per backend, always on the real server. */
export function bizStoreContract(backend: string, harness: StoreHarness): void {
  describe(`BizStore contract on ${backend}`, () => {
    let db: Database;
    let store: PostgresBizStore;
    let dispose: () => Promise<void>;

    beforeAll(async () => {
      const fresh = await harness.fresh(1);
      db = fresh.handles[0]!;
      dispose = fresh.dispose;
      await migrate(db);
      store = new PostgresBizStore(db, { owner: 'contract-test' });
    });
    afterAll(async () => {
      await store?.close();
      await dispose?.();
    });

    describe('migrations', () => {
      it('6 concurrent migrators on a fresh schema apply each migration once, without error', async () => {
        const fresh = await harness.fresh(6);
        try {
          const applied = await Promise.all(fresh.handles.map((h) => migrate(h)));
          expect(applied.filter((a) => a.length > 0)).toEqual([MIGRATIONS.map((m) => m.version)]);
          const h = fresh.handles[0]!;
          const { rows } = await h.query<{ version: number }>('SELECT version FROM idmint_migrations');
          expect(rows.map((r) => r.version).sort((x, y) => x - y)).toEqual(MIGRATIONS.map((m) => m.version));
          const tables = await h.query<{ table_name: string }>(
            `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_name LIKE 'idmint%' ORDER BY table_name`,
          );
          expect(tables.rows.map((r) => r.table_name)).toEqual([
            'idmint_biz',
            'idmint_ledger',
            'idmint_migrations',
            'idmint_process',
            'idmint_region',
            'idmint_region_floor',
            'idmint_segment',
            'idmint_setting',
            'idmint_tag_token',
            'idmint_worker_node',
          ]);
          expect(await migrate(h)).toEqual([]);
        } finally {
          await fresh.dispose();
        }
      });
    });

    describe('settings', () => {
      it('the first claim of a name is recorded; every later claim, concurrent or not, returns it', async () => {
        const settings = new PostgresSettings(db, 'contract-test');
        const name = `${uniqueTag('setting')}:fingerprint`;
        expect(await settings.get(name)).toBeUndefined();
        const values = Array.from({ length: 8 }, (_, i) => `value-${i}`);
        const recorded = await Promise.all(values.map((v) => settings.claim(name, v)));
        expect(new Set(recorded).size).toBe(1);
        expect(values).toContain(recorded[0]);
        expect(await settings.claim(name, 'another')).toBe(recorded[0]);
        expect(await settings.get(name)).toBe(recorded[0]);
      });
    });

    describe('database', () => {
      it('returns int8 as bigint, also past 2^53, inside and outside transactions', async () => {
        const { rows } = await db.query<{ x: bigint; y: number }>('SELECT 9007199254740993::int8 AS x, 7::int4 AS y');
        expect(rows[0]).toEqual({ x: 9007199254740993n, y: 7 });
        const inTx = await db.transaction(async (tx) => (await tx.query<{ x: bigint }>('SELECT (-5)::int8 AS x')).rows[0]!.x);
        expect(inTx).toBe(-5n);
      });

      it('rolls a transaction back when its function throws, and rethrows that very error', async () => {
        const tag = uniqueTag('rollback');
        const boom = new Error('boom');
        await expect(
          db.transaction(async (tx) => {
            await tx.query('INSERT INTO idmint_biz (biz_tag) VALUES ($1)', [tag]);
            throw boom;
          }),
        ).rejects.toBe(boom);
        expect(await store.getBiz(tag)).toBeNull();
      });

      it('enforces max_id <= 2^53-1 in the schema (invariant 4)', async () => {
        const tag = uniqueTag('check');
        await store.createBiz({ bizTag: tag });
        await expect(db.query('UPDATE idmint_segment SET max_id = 9007199254740992 WHERE biz_tag = $1', [tag])).rejects.toMatchObject({ code: '23514' });
      });
    });

    describe('tags', () => {
      it('creates a tag with defaults, reads it back, lists it', async () => {
        const tag = uniqueTag('defaults');
        const created = await store.createBiz({ bizTag: tag });
        expect(created).toMatchObject({
          bizTag: tag,
          mode: 'segment',
          step: 1000,
          maxLimit: null,
          shards: 1,
          fallback: 'snowflake',
          pool: 'auto',
          description: '',
        });
        expect(created.createdAt).toBeInstanceOf(Date);
        expect(await store.getBiz(tag)).toEqual(created);
        expect((await store.listBiz()).map((t) => t.bizTag)).toContain(tag);
      });

      it('creates a tag with every field set', async () => {
        const tag = uniqueTag('full');
        const input = {
          bizTag: tag,
          mode: 'sharded',
          step: 50,
          maxLimit: 4294967295,
          shards: 4,
          fallback: 'error',
          pool: 'redis-list',
          description: 'orders',
        } as const;
        expect(await store.createBiz(input)).toMatchObject(input);
        expect(await store.getBiz(tag)).toMatchObject(input);
      });

      it('refuses an existing tag with 409 BIZ_TAG_EXISTS, also when created concurrently', async () => {
        const tag = uniqueTag('dup');
        const results = await Promise.allSettled(Array.from({ length: 5 }, () => store.createBiz({ bizTag: tag })));
        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
        for (const r of results.filter((x) => x.status === 'rejected')) {
          expect((r as PromiseRejectedResult).reason).toMatchObject({ code: 'BIZ_TAG_EXISTS', status: 409 });
        }
        expect(await codeOf(store.createBiz({ bizTag: tag }))).toBe('BIZ_TAG_EXISTS');
      });

      it('updates only the fields given; maxLimit null removes the limit', async () => {
        const tag = uniqueTag('upd');
        const created = await store.createBiz({ bizTag: tag, maxLimit: 100, description: 'a' });
        const updated = await store.updateBiz(tag, { step: 77, description: 'b', fallback: 'segment' });
        expect(updated).toMatchObject({ step: 77, description: 'b', fallback: 'segment', maxLimit: 100, mode: 'segment' });
        expect(updated.createdAt).toEqual(created.createdAt);
        expect(updated.updatedAt.getTime()).toBeGreaterThanOrEqual(created.updatedAt.getTime());
        expect(await store.updateBiz(tag, { maxLimit: null })).toMatchObject({ maxLimit: null, step: 77 });
        expect(await store.getBiz(tag)).toMatchObject({ maxLimit: null, step: 77, description: 'b' });
      });

      it('soft-deletes: gone from get and list; update, delete and allocate say UNKNOWN_BIZ_TAG', async () => {
        const tag = uniqueTag('del');
        await store.createBiz({ bizTag: tag });
        await store.deleteBiz(tag);
        expect(await store.getBiz(tag)).toBeNull();
        expect((await store.listBiz()).map((t) => t.bizTag)).not.toContain(tag);
        expect(await codeOf(store.updateBiz(tag, { step: 5 }))).toBe('UNKNOWN_BIZ_TAG');
        expect(await codeOf(store.deleteBiz(tag))).toBe('UNKNOWN_BIZ_TAG');
        expect(await codeOf(store.allocate(tag, 10))).toBe('UNKNOWN_BIZ_TAG');
        expect(await codeOf(store.allocate(uniqueTag('never'), 10))).toBe('UNKNOWN_BIZ_TAG');
        expect(await store.getBiz(uniqueTag('never'))).toBeNull();
      });

      it('keeps a re-created tag in its old mode, so its counters never restart in another numbering', async () => {
        const tag = uniqueTag('remode');
        await store.createBiz({ bizTag: tag, mode: 'sharded', shards: 2 });
        await store.deleteBiz(tag);
        expect(await fieldOf(store.createBiz({ bizTag: tag, mode: 'segment' }))).toBe('mode');
        await expect(store.createBiz({ bizTag: tag, mode: 'sharded', shards: 2 })).resolves.toMatchObject({ mode: 'sharded' });
      });

      it('startAfter raises the counters once: a later one at or below the floor changes nothing, and a shard added later starts at the floor', async () => {
        const tag = uniqueTag('floor');
        await store.createBiz({ bizTag: tag, mode: 'sharded', shards: 1, step: 10 });
        expect(await store.updateBiz(tag, { startAfter: 500 })).toMatchObject({ countersRaised: true });
        expect((await store.allocate(tag, 10)).start).toBe(501);
        expect(await store.updateBiz(tag, { startAfter: 500 })).toMatchObject({ countersRaised: false });
        expect(await store.updateBiz(tag, { startAfter: 400 })).toMatchObject({ countersRaised: false });
        expect((await store.allocate(tag, 10)).start).toBe(511);
        await store.updateBiz(tag, { shards: 3 });
        expect((await store.allocate(tag, 10, { shard: 2 })).start).toBe(501);
        expect(await store.updateBiz(tag, { startAfter: 600 })).toMatchObject({ countersRaised: true });
        expect((await store.allocate(tag, 10)).start).toBe(601);
      });

      it('rolls back an update that makes a tag incoherent', async () => {
        const tag = uniqueTag('coherent');
        await store.createBiz({ bizTag: tag, fallback: 'snowflake' });
        expect(await fieldOf(store.updateBiz(tag, { maxLimit: 100 }))).toBe('fallback');
        expect(await store.getBiz(tag)).toMatchObject({ maxLimit: null, fallback: 'snowflake' });
        await expect(store.updateBiz(tag, { maxLimit: 100, fallback: 'error' })).resolves.toMatchObject({ maxLimit: 100, fallback: 'error' });
      });

      it('rejects bad input with BAD_REQUEST naming the field', async () => {
        const tag = uniqueTag('bad');
        await store.createBiz({ bizTag: tag });
        // Thunks: each call starts only when checked, so no rejection is left unhandled meanwhile.
        const cases: [() => Promise<unknown>, string][] = [
          [() => store.createBiz({ bizTag: 'Order' }), 'bizTag'],
          [() => store.createBiz({ bizTag: '' }), 'bizTag'],
          [() => store.createBiz({ bizTag: '-x' }), 'bizTag'],
          [() => store.createBiz({ bizTag: 'a'.repeat(65) }), 'bizTag'],
          [() => store.createBiz({ bizTag: uniqueTag('s'), step: 0 }), 'step'],
          [() => store.createBiz({ bizTag: uniqueTag('s'), step: 1.5 }), 'step'],
          [() => store.createBiz({ bizTag: uniqueTag('s'), step: MAX_STEP + 1 }), 'step'],
          [() => store.createBiz({ bizTag: uniqueTag('s'), step: '10' as unknown as number }), 'step'],
          [() => store.createBiz({ bizTag: uniqueTag('s'), maxLimit: 0 }), 'maxLimit'],
          [() => store.createBiz({ bizTag: uniqueTag('s'), maxLimit: 2 ** 53 }), 'maxLimit'],
          [() => store.createBiz({ bizTag: uniqueTag('s'), shards: 0 }), 'shards'],
          [() => store.createBiz({ bizTag: uniqueTag('s'), shards: MAX_SHARDS + 1 }), 'shards'],
          [() => store.createBiz({ bizTag: uniqueTag('s'), mode: 'leaf' as never }), 'mode'],
          [() => store.createBiz({ bizTag: uniqueTag('s'), fallback: 'retry' as never }), 'fallback'],
          [() => store.createBiz({ bizTag: uniqueTag('s'), pool: 'disk' as never }), 'pool'],
          [() => store.createBiz({ bizTag: uniqueTag('s'), description: 5 as never }), 'description'],
          [() => store.createBiz({ bizTag: uniqueTag('s'), colour: 'red' } as never), 'colour'],
          [() => store.createBiz({ bizTag: uniqueTag('s'), shards: 2 }), 'shards'],
          [() => store.createBiz({ bizTag: uniqueTag('s'), maxLimit: 10, fallback: 'snowflake' }), 'fallback'],
          [() => store.updateBiz(tag, { mode: 'sharded' }), 'mode'],
          [() => store.updateBiz(tag, { shards: 2 }), 'shards'],
          [() => store.updateBiz(tag, { step: -1 }), 'step'],
          [() => store.updateBiz(tag, { bizTag: 'other' } as never), 'bizTag'],
          [() => store.updateBiz('UPPER', { step: 1 }), 'bizTag'],
          [() => store.getBiz('no spaces'), 'bizTag'],
          [() => store.deleteBiz('../etc'), 'bizTag'],
          [() => store.allocate(tag, 0), 'step'],
          [() => store.allocate(tag, -10), 'step'],
          [() => store.allocate(tag, 2.5), 'step'],
          [() => store.allocate(tag, Number.NaN), 'step'],
          [() => store.allocate(tag, 10, { shard: -1 }), 'shard'],
          [() => store.allocate(tag, 10, { shard: 1 }), 'shard'],
        ];
        for (const [call, field] of cases) {
          await expect(call()).rejects.toMatchObject({ code: 'BAD_REQUEST', status: 400, field });
        }
        // Nothing was allocated by the refused calls.
        expect(await store.allocate(tag, 10)).toEqual({ bizTag: tag, shard: 0, start: 1, end: 10 });
      });
    });

    describe('allocation', () => {
      it('8 concurrent allocators x 500 segments: pairwise disjoint, together contiguous, each in the ledger', async () => {
        const tag = uniqueTag('conc');
        await store.createBiz({ bizTag: tag, step: 100 });
        const workers = 8;
        const perWorker = 500;
        const started = performance.now();
        const results = await Promise.all(
          Array.from({ length: workers }, async (_, w) => {
            const got: Segment[] = [];
            // Steps differ per worker so adjacent ranges of different sizes must still tile.
            for (let i = 0; i < perWorker; i++) got.push(await store.allocate(tag, 10 + w, { by: `w${w}` }));
            return got;
          }),
        );
        rates[backend] = Math.round((workers * perWorker) / ((performance.now() - started) / 1000));
        const all = results.flat();
        expect(all).toHaveLength(workers * perWorker);
        const total = results.reduce((sum, got, w) => sum + got.length * (10 + w), 0);
        expect(expectContiguous(all)).toBe(total);
        for (const [w, got] of results.entries()) for (const s of got) expect(s.end - s.start + 1).toBe(10 + w);

        const ledger = await db.query<{ start_id: bigint; end_id: bigint; allocated_by: string; shard: number }>(
          'SELECT start_id, end_id, allocated_by, shard FROM idmint_ledger WHERE biz_tag = $1 ORDER BY start_id',
          [tag],
        );
        const byStart = new Map(results.flatMap((got, w) => got.map((s) => [s.start, { s, by: `w${w}` }] as const)));
        expect(ledger.rows).toHaveLength(all.length);
        for (const row of ledger.rows) {
          const hit = byStart.get(Number(row.start_id));
          expect(hit?.s.end).toBe(Number(row.end_id));
          expect(row.allocated_by).toBe(hit?.by);
          expect(row.shard).toBe(0);
        }
      });

      it('random step sequences give contiguous, disjoint ranges (property)', async () => {
        await fc.assert(
          fc.asyncProperty(fc.array(fc.integer({ min: 1, max: 5000 }), { minLength: 1, maxLength: 15 }), async (steps) => {
            const tag = uniqueTag('prop');
            await store.createBiz({ bizTag: tag });
            const got: Segment[] = [];
            for (const step of steps) got.push(await store.allocate(tag, step));
            expect(got.map((s) => s.end - s.start + 1)).toEqual(steps);
            expect(expectContiguous(got)).toBe(steps.reduce((a, b) => a + b, 0));
          }),
          { numRuns: 25 },
        );
      });

      it('max_limit: a partial last range, then SEGMENT_EXHAUSTED and never a range past it, even under concurrency', async () => {
        const tag = uniqueTag('limit');
        await store.createBiz({ bizTag: tag, maxLimit: 1234 });
        const got: Segment[] = [];
        const errors: unknown[] = [];
        await Promise.all(
          Array.from({ length: 4 }, async () => {
            for (;;) {
              try {
                got.push(await store.allocate(tag, 100));
              } catch (err) {
                errors.push(err);
                return;
              }
            }
          }),
        );
        expect(expectContiguous(got)).toBe(1234);
        expect(Math.max(...got.map((s) => s.end))).toBe(1234);
        expect(got.filter((s) => s.end - s.start + 1 !== 100)).toEqual([{ bizTag: tag, shard: 0, start: 1201, end: 1234 }]);
        expect(errors).toHaveLength(4);
        for (const err of errors) {
          expect(err).toBeInstanceOf(SegmentExhaustedError);
          expect(err).toMatchObject({ code: 'SEGMENT_EXHAUSTED', bizTag: tag, maxLimit: 1234, retriable: false });
        }
        expect(await codeOf(store.allocate(tag, 1))).toBe('SEGMENT_EXHAUSTED');
        const ledger = await db.query<{ m: bigint }>('SELECT max(end_id) AS m FROM idmint_ledger WHERE biz_tag = $1', [tag]);
        expect(ledger.rows[0]!.m).toBe(1234n);

        // Raising the limit resumes after it; lowering it below what was issued refuses again, never wraps.
        await store.updateBiz(tag, { maxLimit: 1300 });
        expect(await store.allocate(tag, 100)).toMatchObject({ start: 1235, end: 1300 });
        await store.updateBiz(tag, { maxLimit: 10 });
        expect(await codeOf(store.allocate(tag, 1))).toBe('SEGMENT_EXHAUSTED');
      });

      it('stops at 2^53-1 without a max_limit', async () => {
        const tag = uniqueTag('top');
        await store.createBiz({ bizTag: tag });
        await db.query('UPDATE idmint_segment SET max_id = $2 WHERE biz_tag = $1', [tag, Number.MAX_SAFE_INTEGER - 5]);
        expect(await store.allocate(tag, 100)).toMatchObject({ start: Number.MAX_SAFE_INTEGER - 4, end: Number.MAX_SAFE_INTEGER });
        await expect(store.allocate(tag, 1)).rejects.toMatchObject({ code: 'SEGMENT_EXHAUSTED', maxLimit: Number.MAX_SAFE_INTEGER });
      });

      it('delete then re-create keeps the counter: ranges never repeat', async () => {
        const tag = uniqueTag('recreate');
        await store.createBiz({ bizTag: tag, step: 10 });
        const before = [await store.allocate(tag, 10), await store.allocate(tag, 10)];
        await store.deleteBiz(tag);
        const again = await store.createBiz({ bizTag: tag, step: 500, description: 'second life' });
        expect(again).toMatchObject({ step: 500, description: 'second life' });
        const after = [await store.allocate(tag, 500), await store.allocate(tag, 3)];
        expect(expectContiguous([...before, ...after])).toBe(523);
        expect(after[0]!.start).toBe(21);
      });

      it('shards count independently; growing shards adds counters', async () => {
        const tag = uniqueTag('shards');
        await store.createBiz({ bizTag: tag, mode: 'sharded', shards: 3 });
        for (const shard of [0, 1, 2]) expect(await store.allocate(tag, 5, { shard })).toEqual({ bizTag: tag, shard, start: 1, end: 5 });
        expect(await store.allocate(tag, 5, { shard: 1 })).toMatchObject({ shard: 1, start: 6, end: 10 });
        expect(await codeOf(store.allocate(tag, 5, { shard: 3 }))).toBe('BAD_REQUEST');
        await store.updateBiz(tag, { shards: 4 });
        expect(await store.allocate(tag, 5, { shard: 3 })).toMatchObject({ shard: 3, start: 1, end: 5 });
        expect(await store.allocate(tag, 5, { shard: 1 })).toMatchObject({ shard: 1, start: 11, end: 15 });
      });
    });

    describe('worker nodes', () => {
      it('hands out distinct, increasing worker ids, also concurrently', async () => {
        const repo = new WorkerNodeRepository(db);
        const first = await repo.insert({ hostName: '10.0.0.1', port: '8080' });
        const many = await Promise.all(Array.from({ length: 10 }, (_, i) => repo.insert({ hostName: 'h', port: String(i), type: 1 })));
        const distinct = [first, ...many];
        expectNoDuplicates(distinct);
        expect(distinct).toHaveLength(11);
        for (const id of many) expect(id).toBeGreaterThan(first);
        expect(await repo.get(first)).toMatchObject({ id: first, hostName: '10.0.0.1', port: '8080', type: 2 });
        expect(await repo.get(-1)).toBeNull();
      });
    });

    describe('lifecycle', () => {
      it('close() is idempotent; a closed database answers NOT_READY', async () => {
        const fresh = await harness.fresh(1);
        const h = fresh.handles[0]!;
        await h.query('SELECT 1');
        await fresh.dispose();
        await h.close();
        await expect(h.query('SELECT 1')).rejects.toMatchObject({ code: 'NOT_READY' });
        await expect(h.transaction(async () => 1)).rejects.toMatchObject({ code: 'NOT_READY' });
      });
    });
  });
}
