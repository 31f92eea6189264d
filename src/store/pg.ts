import pg from 'pg';
import { IdmintError } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/logger.js';
import type { Database, SqlClient } from './db.js';
import { mapDriverError, sqlState } from './errors.js';
import { checkInteger, defaults, OptionsError, resolveOptions } from '../core/options.js';
import { Episode } from '../core/episode.js';

export interface PgDatabaseOptions {
  /** `postgres://user@host:port/db`. Required. */
  connectionString: string;
  /** Schema holding idmint's tables; created if missing and put first on every connection's search_path. Default: the server's search_path. */
  schema?: string | undefined;
  /** Pool size. Default 10. */
  max?: number;
  /** How long to wait for a connection before failing with NOT_READY. Default 5000. */
  connectionTimeoutMillis?: number;
  logger?: Logger;
}

export const PG_DATABASE_DEFAULTS = defaults({ max: 10, connectionTimeoutMillis: 5000 });

const SCHEMA_PATTERN = /^[a-z_][a-z0-9_]{0,62}$/;
type TypeId = Parameters<typeof pg.types.getTypeParser>[0];
const INT8_OID = 20 as TypeId;
const INT8_ARRAY_OID = 1016 as TypeId;

/** A Database over a `pg.Pool`. `int8` comes back as `bigint` through this pool's own type parsers. */
export function createPgDatabase(options: PgDatabaseOptions): Database {
  const opts = resolveOptions(PG_DATABASE_DEFAULTS, options, (o) => {
    if (typeof o.connectionString !== 'string' || o.connectionString === '') throw new OptionsError('Postgres', 'connectionString', 'is required');
    if (o.schema !== undefined && !SCHEMA_PATTERN.test(o.schema)) throw new OptionsError('Postgres', 'schema', `must match ${String(SCHEMA_PATTERN)}`);
    checkInteger('Postgres', o, 'max', 1);
    checkInteger('Postgres', o, 'connectionTimeoutMillis', 1);
  });
  const log = (opts.logger ?? silentLogger).child({ component: 'pg' });

  // Per pool, not pg.types: other code in the process may expect the global defaults.
  const types = new pg.TypeOverrides();
  types.setTypeParser(INT8_OID, (v: string) => BigInt(v));
  const parseInt8Array = pg.types.getTypeParser(INT8_ARRAY_OID);
  types.setTypeParser(INT8_ARRAY_OID, (v: string) => (parseInt8Array(v) as (string | null)[]).map((x) => (x === null ? null : BigInt(x))));

  const pool = new pg.Pool({
    connectionString: opts.connectionString,
    max: opts.max,
    connectionTimeoutMillis: opts.connectionTimeoutMillis,
    // A silently dead connection must fail a query, not hang every caller behind it.
    keepAlive: true,
    query_timeout: 15_000,
    types,
    ...(opts.schema === undefined ? {} : { options: `-c search_path=${opts.schema}` }),
  });
  // An idle client losing its server must not crash the process; the next query reports it. A
  // restart drops every idle client at once: one episode, ended by the next query that succeeds.
  const lost = new Episode(log, 'postgres connections lost');
  pool.on('error', (err) => lost.fail({}, err.message));

  let ready: Promise<void> | undefined;
  let closing: Promise<void> | undefined;

  const ensureReady = (): Promise<void> => {
    if (closing) return Promise.reject(new IdmintError('NOT_READY', 'the database is closed'));
    if (opts.schema === undefined) return Promise.resolve();
    ready ??= createSchema(pool, opts.schema).catch((err: unknown) => {
      ready = undefined; // retry on the next query: the server may come back
      throw mapDriverError('postgres', err);
    });
    return ready;
  };

  const query = async <R>(sql: string, params?: readonly unknown[]): Promise<{ rows: R[] }> => {
    await ensureReady();
    try {
      const res = await pool.query(sql, params as unknown[] | undefined);
      if (lost.active) lost.recover();
      return { rows: res.rows as R[] };
    } catch (err) {
      throw mapDriverError('postgres', err);
    }
  };

  const transaction = async <T>(fn: (tx: SqlClient) => Promise<T>): Promise<T> => {
    await ensureReady();
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (err) {
      throw mapDriverError('postgres', err);
    }
    let broken: unknown;
    let fnError: unknown;
    try {
      await client.query('BEGIN');
      const tx: SqlClient = {
        query: async <R>(sql: string, params?: readonly unknown[]) => {
          try {
            return { rows: (await client.query(sql, params as unknown[] | undefined)).rows as R[] };
          } catch (err) {
            throw mapDriverError('postgres', err);
          }
        },
      };
      const result = await fn(tx).catch((err: unknown) => {
        fnError = err;
        throw err;
      });
      await client.query('COMMIT');
      return result;
    } catch (err) {
      try {
        await client.query('ROLLBACK');
      } catch (rollbackErr) {
        broken = rollbackErr; // the connection is unusable: destroy it rather than return it to the pool
      }
      // The caller's own failure passes through untouched; only BEGIN/COMMIT failures are mapped.
      throw err === fnError ? err : mapDriverError('postgres', err);
    } finally {
      client.release(broken === undefined ? undefined : true);
    }
  };

  const close = (): Promise<void> => {
    closing ??= pool.end().catch((err: unknown) => log.warn({ err }, 'closing the postgres pool failed'));
    return closing;
  };

  return Object.freeze({ query, transaction, close });
}

async function createSchema(pool: pg.Pool, schema: string): Promise<void> {
  try {
    await pool.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
  } catch (err) {
    // Two processes creating the schema at once: the loser sees a duplicate, which is success.
    const code = sqlState(err);
    if (code !== '23505' && code !== '42P06') throw err;
  }
}
