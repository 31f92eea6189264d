import { PGlite, types } from '@electric-sql/pglite';
import { IdmintError } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/logger.js';
import type { Database, SqlClient } from './db.js';
import { mapDriverError } from './errors.js';

export interface PgliteDatabaseOptions {
  /** Directory of the database files; undefined keeps it in memory (gone on close). */
  dataDir?: string | undefined;
  logger?: Logger;
}

/**
 * Memory settings of the embedded database. idmint's tables are a few rows per tag and a ledger
 * row per segment: 16 MB of shared buffers hold them many times over, where PGlite's default
 * 128 MB (grown into the WASM heap, which never shrinks) was most of the embedded server's RSS.
 */
const EMBEDDED_SETTINGS = ['shared_buffers = 16MB', 'wal_buffers = 1MB', 'work_mem = 1MB', 'maintenance_work_mem = 16MB', 'temp_buffers = 1MB'];

/**
 * A Database over PGlite (Postgres 18 in WASM, one connection). PGlite runs one query or
 * transaction at a time, so concurrent callers queue; `int8` comes back as `bigint`.
 * Inside `transaction(fn)` use only `tx`: a `db.query` there would wait for the transaction forever.
 */
export async function createPgliteDatabase(options: PgliteDatabaseOptions = {}): Promise<Database> {
  const log = (options.logger ?? silentLogger).child({ component: 'pglite' });
  const parsers = { [types.INT8]: (v: string) => BigInt(v) };
  let db: PGlite;
  try {
    db = await PGlite.create({ ...(options.dataDir === undefined ? {} : { dataDir: options.dataDir }), parsers, postgresqlconf: EMBEDDED_SETTINGS });
  } catch (err) {
    throw new IdmintError('NOT_READY', `PGlite could not open ${options.dataDir ?? 'an in-memory database'}: ${String(err)}`, { cause: err });
  }
  log.debug({ dataDir: options.dataDir ?? 'memory' }, 'pglite opened');
  let closing: Promise<void> | undefined;

  const checkOpen = (): void => {
    if (closing) throw new IdmintError('NOT_READY', 'the database is closed');
  };

  const query = async <R>(sql: string, params?: readonly unknown[]): Promise<{ rows: R[] }> => {
    checkOpen();
    try {
      return { rows: (await db.query<R>(sql, params as unknown[] | undefined)).rows };
    } catch (err) {
      throw mapDriverError('pglite', err);
    }
  };

  const transaction = async <T>(fn: (tx: SqlClient) => Promise<T>): Promise<T> => {
    checkOpen();
    let fnError: unknown;
    try {
      return await db.transaction(async (t) => {
        const tx: SqlClient = {
          query: async <R>(sql: string, params?: readonly unknown[]) => {
            try {
              return { rows: (await t.query<R>(sql, params as unknown[] | undefined)).rows };
            } catch (err) {
              throw mapDriverError('pglite', err);
            }
          },
        };
        try {
          return await fn(tx);
        } catch (err) {
          fnError = err;
          throw err;
        }
      });
    } catch (err) {
      // The caller's own failure passes through untouched; only BEGIN/COMMIT failures are mapped.
      throw err === fnError ? err : mapDriverError('pglite', err);
    }
  };

  const close = (): Promise<void> => {
    // PGlite.close() throws when called twice; the first call's promise is the answer to every call.
    closing ??= db.close().then(
      () => log.debug('pglite closed'),
      (err: unknown) => log.warn({ err }, 'closing pglite failed'),
    );
    return closing;
  };

  // One process owns the embedded database: every change is made here, and heard at once.
  const listen: Database['listen'] = async (channel, listener) => {
    checkOpen();
    const unlisten = await db.listen(channel, (payload) => listener.notify(payload));
    listener.connected(true);
    return async () => {
      if (!closing) await unlisten().catch(() => undefined);
    };
  };

  return Object.freeze({ query, transaction, close, listen });
}
