import { BadRequestError } from '../core/errors.js';
import type { Database } from '../store/db.js';

/** Where a CLI command finds Postgres: `--url` and `--schema`, else DATABASE_URL and IDMINT_PG_SCHEMA. */
export interface DatabaseFlags {
  url?: string;
  schema?: string;
}

/**
 * Opens the deployment's Postgres for a CLI command and migrates it; `what` says what the command
 * reads there, for the refusal when no URL is given. pg is loaded only by the commands that use it
 * (test/e2e/lean-start.test.ts).
 */
export async function openDatabase(flags: DatabaseFlags, what: string): Promise<Database> {
  const url = flags.url ?? process.env.DATABASE_URL;
  if (!url) throw new BadRequestError(`${what} in Postgres: pass --url postgres://… or set DATABASE_URL`, 'url');
  const [{ createPgDatabase }, { migrate }] = await Promise.all([import('../store/pg.js'), import('../store/migrations.js')]);
  // The schema is checked by createPgDatabase, before any connection (CONFIG_INVALID naming it).
  const db = createPgDatabase({ connectionString: url, schema: flags.schema ?? (process.env.IDMINT_PG_SCHEMA?.trim() || undefined), max: 2 });
  await migrate(db);
  return db;
}
