import { BadRequestError, ConfigError } from '../core/errors.js';
import { hasCounter } from '../core/ports.js';
import type { RegionLayout } from '../core/region.js';
import type { Database, SqlClient } from './db.js';

/** What the database recorded, or undefined: one region. */
export async function readRegionRecord(db: SqlClient): Promise<(RegionLayout & { recordedAt: Date }) | undefined> {
  const { rows } = await db.query<{ regions: number; region: number; stripe: string; recorded_at: Date }>(
    'SELECT regions, region, stripe::text AS stripe, recorded_at FROM idmint_region',
  );
  const row = rows[0];
  return row ? { regions: row.regions, region: row.region, stripe: Number(row.stripe), recordedAt: row.recorded_at } : undefined;
}

/**
 * Waits out every statement writing counters (an allocation, a new tag's rows) and holds new ones
 * until the transaction ends: what it records reaches every counter, and every allocation after.
 */
export async function lockCounters(tx: SqlClient): Promise<void> {
  await tx.query('LOCK TABLE idmint_segment IN SHARE ROW EXCLUSIVE MODE');
}

/**
 * Records the layout (once: a row already there stays) and puts it on every counter that has none;
 * inside a transaction that holds `lockCounters`. New counters copy it as they are made.
 */
export async function recordRegion(tx: SqlClient, layout: RegionLayout, by: string): Promise<void> {
  await tx.query('INSERT INTO idmint_region (regions, region, stripe, recorded_by) VALUES ($1, $2, $3, $4) ON CONFLICT (one) DO NOTHING', [
    layout.regions,
    layout.region,
    layout.stripe,
    by,
  ]);
  await tx.query('UPDATE idmint_segment s SET regions = r.regions, region = r.region, stripe = r.stripe FROM idmint_region r WHERE s.regions IS NULL');
}

/** Whether region 0's floors were taken (`takeRegionFloors`). */
async function floorsTaken(db: SqlClient): Promise<boolean> {
  const { rows } = await db.query<{ floors_at: Date | null }>('SELECT floors_at FROM idmint_region');
  return Boolean(rows[0]?.floors_at);
}

/** Each tag's floor as kept (`takeRegionFloors`), in tag order; text: exact past 2^53. */
export async function readRegionFloors(db: SqlClient): Promise<Array<{ bizTag: string; floor: string }>> {
  const { rows } = await db.query<{ biz_tag: string; floor: string }>('SELECT biz_tag, floor::text AS floor FROM idmint_region_floor ORDER BY biz_tag');
  return rows.map((r) => ({ bizTag: r.biz_tag, floor: r.floor }));
}

/** Region 0's floors: as taken, or, not taken yet, what they would be now (each tag's highest counter). */
export async function regionFloors(db: SqlClient): Promise<{ floors: Map<string, number>; taken: boolean }> {
  if (await floorsTaken(db)) return { floors: new Map((await readRegionFloors(db)).map((r) => [r.bizTag, Number(r.floor)])), taken: true };
  const { rows } = await db.query<{ biz_tag: string; floor: string }>('SELECT biz_tag, max(max_id)::text AS floor FROM idmint_segment GROUP BY biz_tag');
  return { floors: new Map(rows.map((r) => [r.biz_tag, Number(r.floor)])), taken: false };
}

/**
 * Keeps each tag's counter as its floor, once (a later call finds them taken and changes nothing);
 * inside a transaction that holds `lockCounters`, so the counters are final.
 */
export async function takeRegionFloors(tx: SqlClient): Promise<void> {
  if (await floorsTaken(tx)) return;
  await tx.query(
    'INSERT INTO idmint_region_floor (biz_tag, floor) SELECT biz_tag, max(max_id) FROM idmint_segment GROUP BY biz_tag HAVING max(max_id) > 0 ON CONFLICT (biz_tag) DO NOTHING',
  );
  await tx.query('UPDATE idmint_region SET floors_at = now()');
}

/** Each tag that has counters: the highest ID handed out (`max`) and its startAfter (`floor`). */
export async function tagCounters(db: SqlClient): Promise<Map<string, { max: number; floor: number }>> {
  const { rows } = await db.query<{ biz_tag: string; max_id: string; start_after: string }>(
    'SELECT s.biz_tag, max(s.max_id)::text AS max_id, max(b.start_after)::text AS start_after FROM idmint_segment s JOIN idmint_biz b USING (biz_tag) GROUP BY s.biz_tag',
  );
  return new Map(rows.map((r) => [r.biz_tag, { max: Number(r.max_id), floor: Number(r.start_after) }]));
}

const describe = (l: RegionLayout): string => `IDMINT_REGION=${l.region} IDMINT_REGIONS=${l.regions} IDMINT_REGION_STRIPE=${l.stripe}`;

/**
 * Holds a process to the region layout its database recorded: the first start with
 * IDMINT_REGIONS records it (only on a database that has handed out no segment yet: one that has
 * becomes a region through `idmint regions apply`, which keeps the others above its counters),
 * every later start must say the same. Returns the layout in force (undefined: one region).
 */
export async function holdRegionRecord(db: Database, wanted: RegionLayout | undefined, by: string): Promise<RegionLayout | undefined> {
  let recorded = await readRegionRecord(db);
  if (!recorded && wanted) {
    await db.transaction(async (tx) => {
      await lockCounters(tx);
      const { rows } = await tx.query<{ used: string }>('SELECT count(*)::text AS used FROM idmint_segment WHERE max_id > 0');
      if (Number(rows[0]!.used) > 0) {
        throw new ConfigError(
          `invalid configuration: ${describe(wanted)} names a region, but this database has already handed out IDs as a single region; make it a region with \`idmint regions apply\` (README "Several regions"), which keeps every region above the IDs it gave`,
        );
      }
      await recordRegion(tx, wanted, by);
    });
    recorded = await readRegionRecord(db);
  }
  if (!recorded) return undefined;
  const layout = { regions: recorded.regions, region: recorded.region, stripe: recorded.stripe };
  if (!wanted) {
    throw new ConfigError(
      `invalid configuration: this database is one of several regions (${describe(layout)}, recorded ${recorded.recordedAt.toISOString()}); start with those settings`,
    );
  }
  if (wanted.regions !== layout.regions || wanted.region !== layout.region || wanted.stripe !== layout.stripe) {
    throw new ConfigError(
      `invalid configuration: ${describe(wanted)} differs from what this database recorded at its first start (${describe(layout)}, ${recorded.recordedAt.toISOString()}); the split is fixed for the life of the data`,
    );
  }
  return layout;
}

/**
 * A tag whose limit ends before this region's first stripe could never hand out an ID here:
 * refused at create and update with a line that says so, not SEGMENT_EXHAUSTED at its first take.
 */
export async function assertRegionRoom(db: SqlClient, tag: { bizTag: string; mode: string; maxLimit: number | null }): Promise<void> {
  if (tag.maxLimit === null || !hasCounter(tag.mode)) return;
  const record = await readRegionRecord(db);
  if (!record) return;
  const first = record.region * record.stripe + 1;
  if (tag.maxLimit < first) {
    throw new BadRequestError(
      `maxLimit ${tag.maxLimit} of "${tag.bizTag}" leaves region ${record.region} of ${record.regions} no IDs: its first stripe starts at ${first} (stripes of ${record.stripe}); give a maxLimit of at least ${first}`,
      'maxLimit',
    );
  }
}
