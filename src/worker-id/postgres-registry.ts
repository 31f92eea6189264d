import { isIdmintError } from '../core/errors.js';
import type { Clock } from '../core/ports.js';
import type { SqlClient } from '../store/db.js';
import type { RegistryListing, RenewOutcome, TakeOutcome, TakeRequest, WorkerIdRegistry } from './registry.js';

export interface PostgresRegistryOptions {
  /** The process's database (its schema: IDMINT_PG_SCHEMA). */
  db: SqlClient;
  /** A lease lives this long after its last renewal, by the database's clock (`now()`). */
  leaseMs: number;
  clock: Clock;
}

/**
 * The registry's table. Created by the provider (idempotently) rather than by a migration, so the
 * registry stands alone; `worker_id = -1` is the registry's own row, whose `identity` is the
 * timeline the registry was last written on and whose `mark_ms` is the guard.
 */
const TABLE_SQL = `CREATE TABLE IF NOT EXISTS idmint_worker_lease (
  worker_id integer PRIMARY KEY CHECK (worker_id >= -1),
  holder text NOT NULL,
  previous_holder text,
  identity text NOT NULL,
  lease_until timestamptz NOT NULL,
  mark_ms bigint NOT NULL DEFAULT 0,
  updated_at timestamptz NOT NULL DEFAULT now()
)`;

/** The server's timeline (a promotion starts a new one), readable by any user; null where there is none (PGlite). */
const TIMELINE_SQL = `SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int AS timeline`;

/**
 * The Postgres registry: one row per id, changed only by single statements whose WHERE is the
 * compare-and-set (a take where the lease ended by the database's `now()`, or the holder is a
 * dead predecessor; a renewal or release where the row names the holder). A Postgres that fails
 * over with asynchronous replication may lose the last commits, and with them leases and marks:
 * the registry remembers its timeline, and a take on another timeline sets a guard, the taker's
 * clock plus two leases, under which no id is used (holders take their ids again through it),
 * safe while clocks agree within a lease. Synchronous replication loses nothing.
 */
export class PostgresRegistry implements WorkerIdRegistry {
  readonly kind = 'postgres';
  readonly where = 'Postgres table idmint_worker_lease';
  private ready: Promise<void> | null = null;
  private timeline: number | null | undefined;

  constructor(private readonly o: PostgresRegistryOptions) {}

  leaseMs(): number {
    return this.o.leaseMs;
  }

  open(maxWorkerId: number): Promise<void> {
    this.ready ??= this.createTable()
      .then(() => this.seal(maxWorkerId))
      .catch((err: unknown) => {
        this.ready = null;
        throw err;
      });
    return this.ready;
  }

  /**
   * An earlier version took a Snowflake worker id from `idmint_worker_node`'s serial (as `uid` tags
   * still do). Moving the serial past the layout makes such a process, started now, refuse instead
   * of taking an id a lease holds. Processes of that version already running are not seen: stop
   * them before starting this one (docs/reliability.md, "Worker ids").
   */
  private async seal(maxWorkerId: number): Promise<void> {
    const seq = "pg_get_serial_sequence('idmint_worker_node', 'id')";
    try {
      const { rows } = await this.o.db.query<{ top: string }>('SELECT COALESCE(max(id), 0)::text AS top FROM idmint_worker_node');
      if (Number(rows[0]!.top) > maxWorkerId) return; // a serial never goes below an id it gave
      // nextval only ever moves forward (setval could move it back under a concurrent insert).
      const probe = await this.o.db.query<{ v: string }>(`SELECT nextval(${seq})::text AS v`);
      const v = Number(probe.rows[0]!.v);
      if (v <= maxWorkerId) await this.o.db.query(`SELECT max(nextval(${seq})) FROM generate_series(1, $1::int)`, [maxWorkerId + 1 - v]);
    } catch {
      // no idmint_worker_node (an unmigrated schema): nothing to seal
    }
  }

  async list(maxWorkerId: number): Promise<RegistryListing> {
    const { rows } = await this.o.db.query<{ worker_id: number; identity: string; held: boolean; mark_ms: string }>(
      'SELECT worker_id, identity, lease_until > now() AS held, mark_ms::text AS mark_ms FROM idmint_worker_lease WHERE worker_id BETWEEN 0 AND $1',
      [maxWorkerId],
    );
    return {
      held: new Set(rows.filter((r) => r.held).map((r) => Number(r.worker_id))),
      known: new Map(rows.map((r) => [Number(r.worker_id), { identity: r.identity, markMs: Number(r.mark_ms) }])),
      reserved: new Set(),
    };
  }

  async take(request: TakeRequest): Promise<TakeOutcome> {
    const guardMs = await this.guard();
    // previous_holder is the row's holder as the update found it (after waiting for its lock), not a snapshot's.
    const { rows } = await this.o.db.query<{ mark_ms: string; previous: string | null }>(
      `INSERT INTO idmint_worker_lease AS l (worker_id, holder, identity, lease_until) VALUES ($1, $2, $3, now() + $4::int * interval '1 millisecond')
       ON CONFLICT (worker_id) DO UPDATE SET previous_holder = l.holder, holder = EXCLUDED.holder, identity = EXCLUDED.identity, lease_until = EXCLUDED.lease_until, updated_at = now()
         WHERE l.lease_until <= now() OR l.holder = ANY($5::text[])
       RETURNING l.mark_ms::text AS mark_ms, l.previous_holder AS previous`,
      [request.workerId, request.token, request.identity, this.o.leaseMs, request.successorOf],
    );
    const row = rows[0];
    if (!row) {
      const held = await this.o.db.query<{ identity: string; holder: string }>('SELECT identity, holder FROM idmint_worker_lease WHERE worker_id = $1', [
        request.workerId,
      ]);
      const h = held.rows[0];
      return { taken: false, heldBy: h ? { identity: h.identity, token: h.holder } : undefined };
    }
    return { taken: true, floorMs: Number(row.mark_ms), guardMs, previousHolder: row.previous };
  }

  async renew(workerId: number, token: string, markMs: number): Promise<RenewOutcome> {
    if (await this.timelineChanged()) return 'lost';
    const { rows } = await this.o.db.query(
      `UPDATE idmint_worker_lease SET lease_until = now() + $3::int * interval '1 millisecond', mark_ms = GREATEST(mark_ms, $4::bigint), updated_at = now()
       WHERE worker_id = $1 AND holder = $2 RETURNING 1 AS ok`,
      [workerId, token, this.o.leaseMs, Math.ceil(markMs)],
    );
    return rows.length === 1 ? 'renewed' : 'lost';
  }

  async release(workerId: number, token: string, finalMs: number): Promise<void> {
    await this.o.db.query('UPDATE idmint_worker_lease SET mark_ms = $3::bigint, lease_until = now(), updated_at = now() WHERE worker_id = $1 AND holder = $2', [
      workerId,
      token,
      Math.ceil(finalMs),
    ]);
  }

  /** The database belongs to the caller. */
  async close(): Promise<void> {}

  private async createTable(): Promise<void> {
    try {
      await this.o.db.query(TABLE_SQL);
    } catch (err) {
      // Two first starts at once: one of them loses the race to create the type; the table exists.
      if (!['23505', '42P07'].includes((err as { code?: string }).code ?? '')) throw err;
    }
  }

  private async readTimeline(): Promise<number | null> {
    try {
      const { rows } = await this.o.db.query<{ timeline: number }>(TIMELINE_SQL);
      return rows[0]?.timeline ?? null;
    } catch (err) {
      // Postgres unreachable is the registry unreachable (the lease runs on until it could lapse),
      // never a new timeline: only a server that answers without WAL functions (PGlite) has none.
      if (isIdmintError(err) && err.code === 'NOT_READY') throw err;
      return null;
    }
  }

  /** True when this connection's server is on another timeline than the one this registry was opened on. */
  private async timelineChanged(): Promise<boolean> {
    if (this.timeline === undefined || this.timeline === null) return false;
    return (await this.readTimeline()) !== this.timeline;
  }

  /**
   * Records the timeline in the registry's own row; on a different one than recorded there, raises
   * the guard to this clock plus two leases. Returns the guard. (A new registry gets none: its row
   * is only lost with the registry's first seconds, if a lossy failover cuts exactly those.)
   */
  private async guard(): Promise<number> {
    const timeline = await this.readTimeline();
    this.timeline ??= timeline;
    const candidate = this.o.clock.now() + 2 * this.o.leaseMs;
    const { rows } = await this.o.db.query<{ mark_ms: string }>(
      `INSERT INTO idmint_worker_lease AS l (worker_id, holder, identity, lease_until, mark_ms) VALUES (-1, 'registry', $1, 'infinity', 0)
       ON CONFLICT (worker_id) DO UPDATE SET identity = EXCLUDED.identity,
         mark_ms = CASE WHEN l.identity = EXCLUDED.identity THEN l.mark_ms ELSE GREATEST(l.mark_ms, $2::bigint) END, updated_at = now()
       RETURNING l.mark_ms::text AS mark_ms`,
      [`timeline:${timeline ?? 'none'}`, candidate],
    );
    return Number(rows[0]!.mark_ms);
  }
}
