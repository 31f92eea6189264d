import { hostname } from 'node:os';
import { BadRequestError, IdmintError, SegmentExhaustedError, UnknownBizTagError } from '../core/errors.js';
import {
  MAX_SEGMENT_ID,
  type BizMode,
  type BizStore,
  type BizTag,
  type BizTagInput,
  type BizTagPatch,
  type FallbackPolicy,
  type PoolKind,
  type Segment,
  type SegmentUsage,
} from '../core/ports.js';
import { silentLogger, type Logger } from '../core/logger.js';
import type { Database, SqlClient } from './db.js';
import { assertRegionRoom } from './region-record.js';
import { assertCoherent, validateBizInput, validateBizPatch, validateBizTag, validateShard, validateStep } from './validate.js';
import { defaults, OptionsError, resolveOptions } from '../core/options.js';
import type { IdFormat } from '../core/format/format.js';
import { traceSegmentUpdate } from '../tracing/segment.js';

export interface PostgresBizStoreOptions {
  /** Recorded as `allocated_by` in the ledger when `allocate` is not given `by`. Default `<hostname>:<pid>`. */
  owner?: string;
  /** Whether `close()` also closes the Database. Default false: whoever opened it closes it. */
  closeDatabase?: boolean;
  logger?: Logger;
}

export const POSTGRES_BIZ_STORE_DEFAULTS = defaults({
  owner: `${hostname()}:${process.pid}`,
  closeDatabase: false,
});

interface BizRow {
  biz_tag: string;
  mode: BizMode;
  step: number;
  max_limit: bigint | null;
  shards: number;
  fallback: FallbackPolicy;
  pool: PoolKind;
  format: IdFormat;
  description: string;
  created_at: Date;
  updated_at: Date;
  start_after: bigint;
  key_fingerprint: string | null;
}

const BIZ_COLUMNS = 'biz_tag, mode, step, max_limit, shards, fallback, pool, format, description, created_at, updated_at, start_after, key_fingerprint';

/**
 * One statement, so atomic without an explicit transaction: take the next range (cut short at the
 * tag's limit, never past it) and record it in the ledger. `step` keeps the size actually taken,
 * which gives the start on both Postgres 15 and 18 (no OLD in RETURNING before 18).
 *
 * Two forms. The plain counter, `(max, max + step]`, for rows without a region (`regions IS NULL`):
 * a row that has one (its database became a region, even while this process ran) answers no row,
 * and the store takes the regional form from then on. The regional form is core/region.ts inline:
 * the segment starts in this region's first stripe at or after max + 1 (`k`) and ends at that
 * stripe's end at the latest. Both compute from the row's max_id in the UPDATE itself, so a
 * concurrent allocation re-reads the row it waited for.
 */
const allocateSql = (regional: boolean): string => {
  const k = '(s.max_id / s.stripe + (((s.region - (s.max_id / s.stripe) % s.regions) % s.regions + s.regions) % s.regions))';
  const start = regional ? `(CASE WHEN ${k} = s.max_id / s.stripe THEN s.max_id + 1 ELSE ${k} * s.stripe + 1 END)` : '(s.max_id + 1)';
  const end = regional ? `LEAST(${start} + $2 - 1, (${k} + 1) * s.stripe, lim.lim)` : 'LEAST(s.max_id + $2, lim.lim)';
  return `
WITH lim AS (
  SELECT COALESCE(max_limit, ${MAX_SEGMENT_ID}) AS lim FROM idmint_biz WHERE biz_tag = $1 AND deleted_at IS NULL
), seg AS (
  UPDATE idmint_segment s
     SET max_id = ${end},
         step = ${end} - ${start} + 1,
         updated_at = now()
    FROM lim
   WHERE s.biz_tag = $1 AND s.shard = $3 AND s.regions IS ${regional ? 'NOT ' : ''}NULL AND ${start} <= lim.lim
  RETURNING s.max_id - s.step + 1 AS start_id, s.max_id AS end_id
)
INSERT INTO idmint_ledger (biz_tag, shard, start_id, end_id, allocated_by)
SELECT $1, $3, start_id, end_id, $4 FROM seg
RETURNING start_id, end_id`;
};
const ALLOCATE_PLAIN = allocateSql(false);
const ALLOCATE_REGIONAL = allocateSql(true);

/** Business tags and segment allocation over Postgres or PGlite (the same SQL on both). */
export class PostgresBizStore implements BizStore, SegmentUsage {
  readonly options: Readonly<Required<Omit<PostgresBizStoreOptions, 'logger'>>>;
  private readonly db: Database;
  private readonly log: Logger;
  private closed = false;
  /** Whether this database's counters are a region's (learnt at the first allocation that finds so). */
  private regional = false;

  constructor(db: Database, options: PostgresBizStoreOptions = {}) {
    this.options = resolveOptions(POSTGRES_BIZ_STORE_DEFAULTS, { owner: options.owner, closeDatabase: options.closeDatabase }, (o) => {
      if (typeof o.owner !== 'string') throw new OptionsError('PostgresBizStore', 'owner', 'must be a string');
    });
    this.db = db;
    this.log = (options.logger ?? silentLogger).child({ component: 'biz-store' });
  }

  async createBiz(input: BizTagInput): Promise<BizTag> {
    const v = validateBizInput(input);
    // Only a tag whose IDs are permuted by the key carries the key's fingerprint.
    const keyed = v.format.startsWith('obfuscated');
    const tag = await this.db.transaction(async (tx) => {
      // A soft-deleted tag comes back to life on its old counters, so its IDs never repeat.
      const { rows } = await tx.query<BizRow>(
        `INSERT INTO idmint_biz AS b (biz_tag, mode, step, current_step, max_limit, shards, fallback, pool, description, format, key_fingerprint)
         VALUES ($1, $2, $3, $3, $4, $5, $6, $7, $8, $9, $10)
         ON CONFLICT (biz_tag) DO UPDATE SET
           mode = EXCLUDED.mode, step = EXCLUDED.step, current_step = EXCLUDED.current_step, max_limit = EXCLUDED.max_limit,
           shards = EXCLUDED.shards, fallback = EXCLUDED.fallback, pool = EXCLUDED.pool, description = EXCLUDED.description,
           created_at = now(), updated_at = now(), deleted_at = NULL
         WHERE b.deleted_at IS NOT NULL AND b.mode = EXCLUDED.mode AND b.format = EXCLUDED.format
           AND b.key_fingerprint IS NOT DISTINCT FROM EXCLUDED.key_fingerprint
         RETURNING ${BIZ_COLUMNS}`,
        [v.bizTag, v.mode, v.step, v.maxLimit, v.shards, v.fallback, v.pool, v.description, v.format, keyed ? (input.keyFingerprint ?? null) : null],
      );
      const row = rows[0];
      if (!row) {
        const { rows: old } = await tx.query<{ mode: BizMode; format: IdFormat; deleted: boolean; key_fingerprint: string | null }>(
          'SELECT mode, format, deleted_at IS NOT NULL AS deleted, key_fingerprint FROM idmint_biz WHERE biz_tag = $1',
          [v.bizTag],
        );
        if (old[0]?.deleted && old[0].mode === v.mode && old[0].format === v.format) {
          throw new BadRequestError(
            `biz tag "${v.bizTag}" was deleted while its IDs were obfuscated with another IDMINT_OBFUSCATION_KEY; re-created with this key its IDs would repeat: choose a new name`,
            'format',
          );
        }
        if (old[0]?.deleted && old[0].mode === v.mode) {
          throw new BadRequestError(
            `biz tag "${v.bizTag}" was deleted with format "${old[0].format}"; re-create it with that format (its IDs must stay decodable) or choose a new name`,
            'format',
          );
        }
        if (old[0]?.deleted) {
          throw new BadRequestError(
            `biz tag "${v.bizTag}" was deleted as a ${old[0].mode} tag; re-create it with mode "${old[0].mode}" (its counters carry on) or choose a new name`,
            'mode',
          );
        }
        throw new IdmintError('BIZ_TAG_EXISTS', `biz tag "${v.bizTag}" already exists`, { details: { bizTag: v.bizTag } });
      }
      await assertRegionRoom(tx, { bizTag: v.bizTag, mode: v.mode, maxLimit: v.maxLimit });
      await ensureSegments(tx, v.bizTag, v.shards);
      if (v.startAfter > 0) await raiseCounters(tx, v.bizTag, v.startAfter);
      return toBizTag(row);
    });
    this.log.info({ bizTag: tag.bizTag, mode: tag.mode, step: tag.step }, 'biz tag created');
    return tag;
  }

  async getBiz(bizTag: string): Promise<BizTag | null> {
    validateBizTag(bizTag);
    const { rows } = await this.db.query<BizRow>(`SELECT ${BIZ_COLUMNS} FROM idmint_biz WHERE biz_tag = $1 AND deleted_at IS NULL`, [bizTag]);
    return rows[0] ? toBizTag(rows[0]) : null;
  }

  async listBiz(): Promise<BizTag[]> {
    const { rows } = await this.db.query<BizRow>(`SELECT ${BIZ_COLUMNS} FROM idmint_biz WHERE deleted_at IS NULL ORDER BY biz_tag`);
    return rows.map(toBizTag);
  }

  async updateBiz(bizTag: string, patch: BizTagPatch): Promise<BizTag & { countersRaised: boolean }> {
    validateBizTag(bizTag);
    const p = validateBizPatch(patch);
    const sets: string[] = ['updated_at = now()'];
    const params: unknown[] = [bizTag];
    const set = (column: string, value: unknown): void => {
      params.push(value);
      sets.push(`${column} = $${params.length}`);
    };
    if (p.step !== undefined) {
      set('step', p.step);
      sets.push(`current_step = $${params.length}`);
    }
    if (p.maxLimit !== undefined) set('max_limit', p.maxLimit);
    if (p.shards !== undefined) set('shards', p.shards);
    if (p.fallback !== undefined) set('fallback', p.fallback);
    if (p.pool !== undefined) set('pool', p.pool);
    if (p.description !== undefined) set('description', p.description);
    const tag = await this.db.transaction(async (tx) => {
      const { rows } = await tx.query<BizRow>(
        `UPDATE idmint_biz SET ${sets.join(', ')} WHERE biz_tag = $1 AND deleted_at IS NULL RETURNING ${BIZ_COLUMNS}`,
        params,
      );
      const row = rows[0];
      if (!row) throw new UnknownBizTagError(bizTag);
      // An obfuscated segment tag permutes 1..maxLimit: a new limit would re-map the IDs handed out.
      if (p.maxLimit !== undefined && row.mode === 'segment' && row.format.startsWith('obfuscated')) {
        throw new BadRequestError(
          `maxLimit of "${bizTag}" is fixed: its ${row.format} IDs are a permutation of 1..maxLimit, and a new limit would change every ID's form`,
          'maxLimit',
        );
      }
      // Checked on the updated row, inside the transaction: an incoherent change rolls back.
      assertCoherent({
        mode: row.mode,
        shards: row.shards,
        maxLimit: row.max_limit === null ? null : Number(row.max_limit),
        fallback: row.fallback,
        startAfter: p.startAfter,
      });
      if (p.maxLimit !== undefined) await assertRegionRoom(tx, { bizTag, mode: row.mode, maxLimit: row.max_limit === null ? null : Number(row.max_limit) });
      await ensureSegments(tx, bizTag, row.shards);
      const countersRaised = p.startAfter ? await raiseCounters(tx, bizTag, p.startAfter) : false;
      return { ...toBizTag(row), countersRaised };
    });
    this.log.info({ bizTag, patch: p, ...(p.startAfter ? { countersRaised: tag.countersRaised } : {}) }, 'biz tag updated');
    return tag;
  }

  async deleteBiz(bizTag: string): Promise<void> {
    validateBizTag(bizTag);
    const { rows } = await this.db.query(
      'UPDATE idmint_biz SET deleted_at = now(), updated_at = now() WHERE biz_tag = $1 AND deleted_at IS NULL RETURNING biz_tag',
      [bizTag],
    );
    if (rows.length === 0) throw new UnknownBizTagError(bizTag);
    this.log.info({ bizTag }, 'biz tag deleted');
  }

  async allocate(bizTag: string, step: number, options: { shard?: number; by?: string } = {}): Promise<Segment> {
    return traceSegmentUpdate(bizTag, options.shard ?? 0, () => this.allocateNow(bizTag, step, options));
  }

  private async allocateNow(bizTag: string, step: number, options: { shard?: number; by?: string }): Promise<Segment> {
    validateBizTag(bizTag);
    validateStep(step);
    const shard = validateShard(options.shard ?? 0);
    const by = options.by ?? this.options.owner;
    if (typeof by !== 'string') throw new BadRequestError('by must be a string', 'by');
    const params = [bizTag, step, shard, by];
    const regional = this.regional;
    let { rows } = await this.db.query<{ start_id: bigint; end_id: bigint }>(regional ? ALLOCATE_REGIONAL : ALLOCATE_PLAIN, params);
    // (Whether this call's query was the plain one: another call may have switched the store meanwhile.)
    if (!rows[0] && !regional && (await this.counterHasRegion(bizTag, shard))) {
      // The database is (or just became) a region: its counters take the regional form from now on.
      this.regional = true;
      ({ rows } = await this.db.query<{ start_id: bigint; end_id: bigint }>(ALLOCATE_REGIONAL, params));
    }
    const row = rows[0];
    if (!row) throw await this.whyNoSegment(bizTag, shard);
    return { bizTag, shard, start: Number(row.start_id), end: Number(row.end_id) };
  }

  async raiseShardCounter(bizTag: string, shard: number, floor: number): Promise<number | undefined> {
    // Compared and raised in one statement, against the counter as it is now (row-locked).
    const { rows } = await this.db.query<{ before: bigint }>(
      `WITH old AS (SELECT max_id FROM idmint_segment WHERE biz_tag = $1 AND shard = $2 FOR UPDATE)
       UPDATE idmint_segment s SET max_id = $3, updated_at = now() FROM old
        WHERE s.biz_tag = $1 AND s.shard = $2 AND old.max_id < $3
       RETURNING old.max_id AS before`,
      [bizTag, shard, floor],
    );
    if (rows.length === 0) return undefined;
    const before = Number(rows[0]!.before);
    this.log.warn({ bizTag, shard, floor, before }, 'segment counter raised to the fence');
    return before;
  }

  /** Every shard's counter, keyed `<bizTag>/<shard>`, deleted tags included (their counters are kept). */
  async shardCounters(): Promise<Map<string, number>> {
    const { rows } = await this.db.query<{ biz_tag: string; shard: number; max_id: bigint }>('SELECT biz_tag, shard, max_id FROM idmint_segment');
    return new Map(rows.map((r) => [`${r.biz_tag}/${r.shard}`, Number(r.max_id)]));
  }

  async highestAllocated(bizTags: readonly string[]): Promise<Map<string, number>> {
    if (bizTags.length === 0) return new Map();
    const { rows } = await this.db.query<{ biz_tag: string; max_id: string }>(
      'SELECT biz_tag, max(max_id)::text AS max_id FROM idmint_segment WHERE biz_tag = ANY($1) GROUP BY biz_tag',
      [bizTags],
    );
    return new Map(rows.map((r) => [r.biz_tag, Number(r.max_id)]));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.options.closeDatabase) await this.db.close();
  }

  private async counterHasRegion(bizTag: string, shard: number): Promise<boolean> {
    const { rows } = await this.db.query('SELECT 1 FROM idmint_segment WHERE biz_tag = $1 AND shard = $2 AND regions IS NOT NULL', [bizTag, shard]);
    return rows.length > 0;
  }

  /** Only on the failure path: tells an unknown tag from a bad shard from an exhausted one. */
  private async whyNoSegment(bizTag: string, shard: number): Promise<IdmintError> {
    const { rows } = await this.db.query<{ max_limit: bigint | null; shards: number; max_id: bigint | null }>(
      `SELECT b.max_limit, b.shards, s.max_id FROM idmint_biz b
         LEFT JOIN idmint_segment s ON s.biz_tag = b.biz_tag AND s.shard = $2
        WHERE b.biz_tag = $1 AND b.deleted_at IS NULL`,
      [bizTag, shard],
    );
    const row = rows[0];
    if (!row) return new UnknownBizTagError(bizTag);
    if (row.max_id === null) return new BadRequestError(`shard must be in [0, ${row.shards - 1}] for biz tag "${bizTag}", got ${shard}`, 'shard');
    return new SegmentExhaustedError(bizTag, row.max_limit === null ? MAX_SEGMENT_ID : Number(row.max_limit));
  }
}

/**
 * Moves every shard's counter up to `startAfter` (never down): the next segment starts above it.
 * False, and nothing changes, when an earlier raise already set a floor at or above it: every
 * segment since then starts above that floor, and what was buffered was dropped then.
 */
async function raiseCounters(tx: SqlClient, bizTag: string, startAfter: number): Promise<boolean> {
  const { rows } = await tx.query('UPDATE idmint_biz SET start_after = $2 WHERE biz_tag = $1 AND start_after < $2 RETURNING biz_tag', [bizTag, startAfter]);
  if (rows.length === 0) return false;
  await tx.query('UPDATE idmint_segment SET max_id = GREATEST(max_id, $2), updated_at = now() WHERE biz_tag = $1', [bizTag, startAfter]);
  return true;
}

/** Counter rows for shards 0..shards-1; existing rows (and their max_id) are kept. */
async function ensureSegments(tx: SqlClient, bizTag: string, shards: number): Promise<void> {
  await tx.query(
    // A shard added later starts at the tag's floor (the highest startAfter applied), as the others did.
    // ... and carries the region's layout, if the database is a region.
    `INSERT INTO idmint_segment (biz_tag, shard, max_id, regions, region, stripe)
     SELECT $1, g, COALESCE((SELECT start_after FROM idmint_biz WHERE biz_tag = $1), 0), r.regions, r.region, r.stripe
       FROM generate_series(0, $2::integer - 1) AS g LEFT JOIN idmint_region r ON true
     ON CONFLICT (biz_tag, shard) DO NOTHING`,
    [bizTag, shards],
  );
}

function toBizTag(row: BizRow): BizTag {
  return Object.freeze({
    bizTag: row.biz_tag,
    mode: row.mode,
    step: row.step,
    maxLimit: row.max_limit === null ? null : Number(row.max_limit),
    shards: row.shards,
    fallback: row.fallback,
    pool: row.pool,
    format: row.format,
    description: row.description,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    startAfter: Number(row.start_after),
    keyFingerprint: row.key_fingerprint,
  });
}
