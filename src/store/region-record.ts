import { BadRequestError, ConfigError } from '../core/errors.js';
import { hasCounter } from '../core/ports.js';
import type { RegionLayout } from '../core/region.js';
import type { Database, SqlClient } from './db.js';

/** What the database recorded, or undefined: one region. */
export async function readRegionRecord(db: SqlClient): Promise<(RegionLayout & { recordedAt: Date }) | undefined> {
  const { rows } = await db.query<{ regions: number; region: number; stripe: string; recorded_at: Date }>('SELECT regions, region, stripe::text AS stripe, recorded_at FROM idmint_region');
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
  await tx.query('INSERT INTO idmint_region (regions, region, stripe, recorded_by) VALUES ($1, $2, $3, $4) ON CONFLICT (one) DO NOTHING', [layout.regions, layout.region, layout.stripe, by]);
  await tx.query('UPDATE idmint_segment s SET regions = r.regions, region = r.region, stripe = r.stripe FROM idmint_region r WHERE s.regions IS NULL');
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
    throw new ConfigError(`invalid configuration: this database is one of several regions (${describe(layout)}, recorded ${recorded.recordedAt.toISOString()}); start with those settings`);
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
