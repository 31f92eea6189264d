import pg from 'pg';
import { IdmintError } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/logger.js';
import type { Database, SqlClient } from './db.js';
import { isPgOutage, mapDriverError, sqlState, unreachable } from './errors.js';
import { Circuit } from '../resilience/circuit.js';
import { checkInteger, defaults, OptionsError, resolveOptions } from '../core/options.js';
import { Episode } from '../core/episode.js';
import { splitPostgresUrl } from './pg-hosts.js';
import { pgListen } from './pg-listen.js';

export interface PgDatabaseOptions {
  /** `postgres://user@host:port/db`. Required. */
  connectionString: string;
  /** Schema holding idmint's tables; created if missing and put first on every connection's search_path. Default: the server's search_path. */
  schema?: string | undefined;
  /** Pool size. Default 10. */
  max?: number;
  /** How long to wait for a connection before failing with NOT_READY. Default 5000. */
  connectionTimeoutMillis?: number;
  /** While Postgres is known to be unreachable, how often one probe looks for it (queries fail at once meanwhile). Default 1000. */
  probeEveryMs?: number;
  /** Called when a connection reaches a server on another timeline or system than before: a failover happened. */
  onFailover?: (from: PgIdentity, to: PgIdentity) => void;
  logger?: Logger;
}

/** The server's identity as far as failovers go: a promotion starts a new timeline. */
export interface PgIdentity {
  readonly timeline: number;
  /** pg_control_system()'s system_identifier, when this user may read it. */
  readonly system?: string;
}

/** Where the database is connected now, for readiness and logs. */
export interface PgServer extends Partial<PgIdentity> {
  readonly host?: string;
  /** Failovers seen since start. */
  readonly failovers: number;
}

export interface PgDatabase extends Database {
  server(): PgServer;
}

export const PG_DATABASE_DEFAULTS = defaults({ max: 10, connectionTimeoutMillis: 5000, probeEveryMs: 1000 });

const SCHEMA_PATTERN = /^[a-z_][a-z0-9_]{0,62}$/;
type TypeId = Parameters<typeof pg.types.getTypeParser>[0];
const INT8_OID = 20 as TypeId;
const INT8_ARRAY_OID = 1016 as TypeId;

/** A Database over a `pg.Pool`. `int8` comes back as `bigint` through this pool's own type parsers. */
export function createPgDatabase(options: PgDatabaseOptions): PgDatabase {
  const opts = resolveOptions(PG_DATABASE_DEFAULTS, options, (o) => {
    if (typeof o.connectionString !== 'string' || o.connectionString === '') throw new OptionsError('Postgres', 'connectionString', 'is required');
    if (o.schema !== undefined && !SCHEMA_PATTERN.test(o.schema))
      throw new OptionsError('Postgres', 'schema', `(IDMINT_PG_SCHEMA, --schema) must be a lower-case SQL identifier matching ${String(SCHEMA_PATTERN)}`);
    checkInteger('Postgres', o, 'max', 1);
    checkInteger('Postgres', o, 'connectionTimeoutMillis', 1);
    checkInteger('Postgres', o, 'probeEveryMs', 1);
  });
  const log = (opts.logger ?? silentLogger).child({ component: 'pg' });

  // Per pool, not pg.types: other code in the process may expect the global defaults.
  const types = new pg.TypeOverrides();
  types.setTypeParser(INT8_OID, (v: string) => BigInt(v));
  const parseInt8Array = pg.types.getTypeParser(INT8_ARRAY_OID);
  types.setTypeParser(INT8_ARRAY_OID, (v: string) => (parseInt8Array(v) as (string | null)[]).map((x) => (x === null ? null : BigInt(x))));

  const hosts = splitPostgresUrl(opts.connectionString);
  // Several hosts (or a target_session_attrs other than any): connect to the writable primary
  // among them, and pick again when it is lost or turns out read-only (a failover).
  const picking = hosts.urls.length > 1 || hosts.targetSessionAttrs !== 'any';
  const identity = new ServerIdentity(log, opts.onFailover);
  // An idle client losing its server must not crash the process; the next query reports it. A
  // restart drops every idle client at once: one episode, ended by the next query that succeeds.
  const lost = new Episode(log, 'postgres connections lost', { dependency: 'postgres' });

  const newPool = (url: string): pg.Pool => {
    const pool = new pg.Pool({
      connectionString: url,
      max: opts.max,
      connectionTimeoutMillis: opts.connectionTimeoutMillis,
      // A silently dead connection must fail a query, not hang every caller behind it.
      keepAlive: true,
      query_timeout: 15_000,
      types,
      ...(opts.schema === undefined ? {} : { options: `-c search_path=${opts.schema}` }),
    });
    pool.on('error', (err) => {
      recheck = true;
      lost.fail({}, err.message);
    });
    return pool;
  };

  // The server's timeline is noted at the first query and again after any connection trouble: a
  // new one means a failover happened (a promotion, or a proxy now pointing at another server).
  let recheck = true;
  let active: { pool: pg.Pool; host: string } | undefined = picking ? undefined : { pool: newPool(hosts.urls[0]!), host: hosts.names[0]! };
  let choosing: Promise<pg.Pool> | undefined;

  const choose = async (): Promise<pg.Pool> => {
    const reasons: string[] = [];
    for (const [i, url] of hosts.urls.entries()) {
      const host = hosts.names[i]!;
      const pool = newPool(url);
      try {
        const { rows } = await pool.query<{ standby: boolean }>('SELECT pg_is_in_recovery() AS standby');
        if (rows[0]?.standby) {
          reasons.push(`${host} is a standby`);
          await pool.end().catch(() => undefined);
          continue;
        }
        active = { pool, host };
        identity.check(pool).catch(() => (recheck = true));
        recheck = false;
        log.info({ host, hosts: hosts.names }, 'connected to the writable primary');
        return pool;
      } catch (err) {
        reasons.push(`${host}: ${(err as Error).message}`);
        await pool.end().catch(() => undefined);
      }
    }
    throw unreachable(`postgres: no writable primary among ${hosts.names.join(', ')} (${reasons.join('; ')})`, undefined, { hosts: hosts.names });
  };

  const currentPool = (): pg.Pool | Promise<pg.Pool> => active?.pool ?? (choosing ??= choose().finally(() => (choosing = undefined)));

  /** A lost or read-only primary: drop its pool so the next query picks again. */
  const dropIfGone = (pool: pg.Pool, mapped: unknown): void => {
    if (mapped instanceof IdmintError && mapped.code === 'NOT_READY') recheck = true;
    if (!picking || active?.pool !== pool || !(mapped instanceof IdmintError) || mapped.code !== 'NOT_READY') return;
    log.warn({ host: active.host, reason: mapped.message }, 'the Postgres primary is gone or read-only; picking the primary again');
    active = undefined;
    pool.end().catch(() => undefined);
  };

  let ready: Promise<void> | undefined;
  let closing: Promise<void> | undefined;

  const ensureReady = (): Promise<void> => {
    if (closing) return Promise.reject(new IdmintError('NOT_READY', 'the database is closed'));
    if (opts.schema === undefined) return Promise.resolve();
    const schema = opts.schema;
    ready ??= Promise.resolve(currentPool())
      .then((pool) => createSchema(pool, schema))
      .catch((err: unknown) => {
        ready = undefined; // retry on the next query: the server may come back
        throw mapDriverError('postgres', err);
      });
    return ready;
  };

  const rawQuery = async <R>(sql: string, params?: readonly unknown[]): Promise<{ rows: R[] }> => {
    await ensureReady();
    const pool = await currentPool();
    try {
      const res = await pool.query(sql, params as unknown[] | undefined);
      if (lost.active) lost.recover();
      if (recheck) {
        recheck = false;
        identity.check(pool).catch(() => (recheck = true));
      }
      return { rows: res.rows as R[] };
    } catch (err) {
      const mapped = mapDriverError('postgres', err);
      dropIfGone(pool, mapped);
      throw mapped;
    }
  };

  const rawTransaction = async <T>(fn: (tx: SqlClient) => Promise<T>): Promise<T> => {
    await ensureReady();
    const pool = await currentPool();
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (err) {
      const mapped = mapDriverError('postgres', err);
      dropIfGone(pool, mapped);
      throw mapped;
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
      const mapped = err === fnError ? err : mapDriverError('postgres', err);
      dropIfGone(pool, mapped);
      throw mapped;
    } finally {
      client.release(broken === undefined ? undefined : true);
    }
  };

  // Once Postgres is known to be gone, no caller waits for a connection timeout to learn it again:
  // queries fail at once (NOT_READY, Retry-After) while one probe at a time looks for it.
  const circuit = new Circuit({
    name: `Postgres (${hosts.names.join(', ')})`,
    isOutage: isPgOutage,
    probe: () => rawQuery('SELECT 1'),
    logger: log,
    probeEveryMs: opts.probeEveryMs,
    dependency: 'postgres',
  });
  const query = <R>(sql: string, params?: readonly unknown[]): Promise<{ rows: R[] }> => circuit.run(() => rawQuery<R>(sql, params));
  const transaction = <T>(fn: (tx: SqlClient) => Promise<T>): Promise<T> => circuit.run(() => rawTransaction(fn));

  const listeners = new Set<() => Promise<void>>();
  const close = (): Promise<void> => {
    closing ??= (async () => {
      circuit.shutdown();
      for (const stop of listeners) await stop();
      await choosing?.catch(() => undefined);
      await active?.pool.end().catch((err: unknown) => log.warn({ err }, 'closing the postgres pool failed'));
    })();
    return closing;
  };

  const server = (): PgServer => ({ host: active?.host, ...identity.current });

  // Notifications carry the schema they come from: the listening connection needs no search_path.
  const listen: Database['listen'] = async (channel, listener) => {
    const stop = pgListen({ urls: hosts.urls, channel, listener, logger: opts.logger ?? silentLogger });
    listeners.add(stop);
    return async () => {
      listeners.delete(stop);
      await stop();
    };
  };

  return Object.freeze({ query, transaction, close, server, listen });
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

/** The timeline of a primary, from its current WAL file's name (readable by any user). */
const TIMELINE_SQL = `SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int AS timeline WHERE NOT pg_is_in_recovery()`;
const SYSTEM_SQL = 'SELECT system_identifier::text AS system FROM pg_control_system()';

/** The last identity seen; a connection reporting another one is a failover, logged and reported once. */
class ServerIdentity {
  private known: PgIdentity | undefined;
  private failovers = 0;

  constructor(
    private readonly log: Logger,
    private readonly onFailover: ((from: PgIdentity, to: PgIdentity) => void) | undefined,
  ) {}

  get current(): Partial<PgIdentity> & { failovers: number } {
    return { ...this.known, failovers: this.failovers };
  }

  /** Reads the server's identity; rejects when it could not (the server going away). A standby has no timeline to note. */
  async check(pool: pg.Pool): Promise<void> {
    await (async () => {
      const { rows } = await pool.query<{ timeline: number }>(TIMELINE_SQL);
      const timeline = rows[0]?.timeline;
      if (timeline === undefined) return;
      const system = await pool.query<{ system: string }>(SYSTEM_SQL).then(
        (r) => r.rows[0]?.system,
        () => undefined,
      );
      this.seen(system === undefined ? { timeline } : { timeline, system });
    })();
  }

  private seen(next: PgIdentity): void {
    const before = this.known;
    if (before && before.timeline === next.timeline && (before.system ?? next.system) === (next.system ?? before.system)) return;
    // A later connection may still report an older timeline (its server has not switched): only moving forward counts.
    if (before && before.system === next.system && next.timeline < before.timeline) return;
    this.known = { ...next, ...(next.system === undefined && before?.system ? { system: before.system } : {}) };
    if (!before) return;
    this.failovers++;
    this.log.warn(
      { from: before, to: this.known },
      'Postgres failover: the server is on a new timeline; checking every tag against its fence before handing out segments',
    );
    this.onFailover?.(before, this.known);
  }
}
