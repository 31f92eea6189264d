/**
 * The small SQL interface over `pg` (Pool) and PGlite. The same SQL runs on both
 * (Postgres 15 and PGlite's 18). `int8` columns always come back as `bigint`.
 */
export interface SqlClient {
  query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<{ rows: R[] }>;
}

export interface Database extends SqlClient {
  /** Runs `fn` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: SqlClient) => Promise<T>): Promise<T>;
  /** Idempotent. */
  close(): Promise<void>;
}
