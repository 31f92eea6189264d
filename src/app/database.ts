import { existsSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '../core/logger.js';
import type { Database } from '../store/db.js';
import type { PgIdentity } from '../store/pg.js';
import { migrate } from '../store/migrations.js';
import { holdRegionRecord } from '../store/region-record.js';
import { regionOf, type Config } from './config.js';
import type { Closers } from './closers.js';
import { postgresCredentialError } from './preflight.js';

/**
 * The one place a process opens its database, so every role sees the same schema: Postgres at
 * DATABASE_URL in IDMINT_PG_SCHEMA, or the embedded PGlite under `dataDir`. Migrates, and holds the
 * process to the region layout the database recorded, before returning.
 */
export async function openDatabase(
  config: Config,
  logger: Logger,
  closers: Closers,
  dataDir?: string,
  hooks: { onFailover?: (from: PgIdentity, to: PgIdentity) => void } = {},
): Promise<Database> {
  let db: Database;
  if (config.DATABASE_URL) {
    // Each driver is loaded only by the processes that use it.
    const { createPgDatabase } = await import('../store/pg.js');
    db = createPgDatabase({
      connectionString: config.DATABASE_URL,
      schema: config.IDMINT_PG_SCHEMA,
      logger,
      ...(hooks.onFailover ? { onFailover: hooks.onFailover } : {}),
    });
    closers.add('postgres', () => db.close());
  } else {
    if (dataDir === undefined) throw new Error('openDatabase: the embedded database needs a data directory');
    const dir = join(dataDir, 'pglite');
    // The first start creates the cluster (PGlite's initdb in WebAssembly, seconds): say so first.
    if (existsSync(join(dir, 'PG_VERSION'))) logger.info({ dataDir: dir }, 'opening the embedded database');
    else logger.info({ dataDir: dir }, 'creating the embedded database (first start: PGlite initdb, a few seconds)');
    const { createPgliteDatabase } = await import('../store/pglite.js');
    db = await createPgliteDatabase({ dataDir: dir, logger });
    closers.add('pglite', () => db.close());
  }
  try {
    await migrate(db, logger);
  } catch (err) {
    throw config.DATABASE_URL ? postgresCredentialError(config.DATABASE_URL, err) : err;
  }
  const region = await holdRegionRecord(db, regionOf(config), `${hostname()}:${process.pid}`);
  if (region)
    logger.info({ region: region.region, regions: region.regions, stripe: region.stripe }, "one region of several: segments from this region's stripes");
  return db;
}
