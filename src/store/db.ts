/**
 * The small SQL interface over `pg` (Pool) and PGlite. The same SQL runs on both
 * (Postgres 15 and PGlite's 18). `int8` columns always come back as `bigint`.
 */
export interface SqlClient {
  query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<{ rows: R[] }>;
}

/** What hears a LISTEN channel: each payload, and when the listening connection is lost or back. */
export interface ChangeListener {
  notify(payload: string): void;
  /** false: lost (notifications meanwhile are missed); true: listening (again). */
  connected(yes: boolean): void;
}

export interface Database extends SqlClient {
  /** Runs `fn` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: SqlClient) => Promise<T>): Promise<T>;
  /** LISTEN on `channel` until the returned stop is called; reconnects by itself. */
  listen(channel: string, listener: ChangeListener): Promise<() => Promise<void>>;
  /** Idempotent. */
  close(): Promise<void>;
}
