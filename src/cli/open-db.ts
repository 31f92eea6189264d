import { BadRequestError, ConfigError } from '../core/errors.js';
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
  const [{ createPgDatabase }, { migrate }, { envSchema }] = await Promise.all([
    import('../store/pg.js'),
    import('../store/migrations.js'),
    import('../app/config.js'),
  ]);
  // IDMINT_PG_SCHEMA checked as the servers check it (config.ts), not read raw.
  const fromEnv = envSchema.shape.IDMINT_PG_SCHEMA.safeParse(process.env.IDMINT_PG_SCHEMA || undefined);
  if (!fromEnv.success) throw new ConfigError(`IDMINT_PG_SCHEMA: ${fromEnv.error.issues[0]?.message ?? 'invalid'}`, 'IDMINT_PG_SCHEMA');
  const db = createPgDatabase({ connectionString: url, schema: flags.schema ?? fromEnv.data, max: 2 });
  await migrate(db);
  return db;
}
