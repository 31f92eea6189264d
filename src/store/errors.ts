import { IdmintError } from '../core/errors.js';

/**
 * Maps a driver failure to what callers can act on: SQL errors (constraint, syntax) pass through
 * with their SQLSTATE; anything that means "the server is not there" becomes NOT_READY.
 */
export function mapDriverError(what: string, err: unknown): unknown {
  if (err instanceof IdmintError) return err;
  const code = sqlState(err);
  // Class 22, data exception (a value the column cannot hold): the caller's input, a 400.
  if (code?.startsWith('22')) return new IdmintError('BAD_REQUEST', `${what}: the database refused a value (${(err as Error).message})`, { cause: err });
  // Class 08 connection, 53 resources, 57 operator intervention (shutdown): the server, not the
  // query; 25006, a write on a read-only server: the primary became a standby (a failover).
  if (code !== undefined && !/^(08|53|57)/.test(code) && code !== '25006') return err;
  const message = `${what} is unavailable: ${err instanceof Error ? err.message : String(err)}`;
  // Only a server that cannot be reached opens the circuit: one connection killed (57P01 on a
  // busy pool, a reset) says nothing about the next, which may well succeed.
  return cannotConnect(err) ? unreachable(message, err) : new IdmintError('NOT_READY', message, { cause: err });
}

const CONNECT_ERRNO = new Set(['ECONNREFUSED', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/** No connection could be made (refused, unreachable, timed out, the server starting or stopping), or a query's read timed out. */
function cannotConnect(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && (CONNECT_ERRNO.has(code) || code === '57P03')) return true;
  const message = err instanceof Error ? err.message : '';
  return /timeout exceeded when trying to connect|Connection terminated due to connection timeout|Query read timeout/i.test(message);
}

/** NOT_READY marked as "the server is not there" (isPgOutage), which opens the database's circuit. */
export function unreachable(message: string, cause?: unknown, details: Record<string, unknown> = {}): IdmintError {
  return new IdmintError('NOT_READY', message, { cause, details: { ...details, pgUnreachable: true } });
}

/** Whether a failure means Postgres is not there, as opposed to an answer (a SQL error) or a caller's own NOT_READY. */
export function isPgOutage(err: unknown): boolean {
  return err instanceof IdmintError && err.details.pgUnreachable === true;
}

/** The five-character SQLSTATE of a Postgres error, if it has one. */
export function sqlState(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}
