import { BadRequestError, IdmintError } from '../core/errors.js';
import { leafKeyToBizTag } from '../core/leaf-key.js';
import { MAX_SEGMENT_ID, MAX_STEP } from '../core/ports.js';
import { call, type ServerTarget } from './http-client.js';
import { redactUrl } from '../core/redact.js';

/** One row of Leaf's `leaf_alloc`. */
export interface LeafRow {
  key: string;
  maxId: number;
  step: number;
  description: string;
}

export interface LeafImportStep {
  row: LeafRow;
  bizTag: string;
  action: 'create' | 'advance' | 'refuse';
  /** The counter floor: every ID the tag issues after the import is above it. */
  startAfter: number;
  reason?: string;
}

/**
 * What an import does, tag by tag, before anything changes: create the tags idmint lacks, advance
 * the segment tags it has, refuse the rest (another mode, or two Leaf keys on one tag).
 */
export function planLeafImport(rows: LeafRow[], existing: Map<string, { mode: string }>, margin: number): LeafImportStep[] {
  const byTag = new Map<string, string>();
  return rows.map((row) => {
    const bizTag = leafKeyToBizTag(row.key);
    const startAfter = row.maxId + margin;
    const refuse = (reason: string): LeafImportStep => ({ row, bizTag, action: 'refuse', startAfter, reason });
    const other = byTag.get(bizTag);
    byTag.set(bizTag, row.key);
    if (other !== undefined) return refuse(`Leaf keys "${other}" and "${row.key}" map to the same tag`);
    if (!Number.isSafeInteger(startAfter) || startAfter < 0 || startAfter >= MAX_SEGMENT_ID)
      return refuse(`max_id ${row.maxId} + margin is outside idmint's segment range`);
    const tag = existing.get(bizTag);
    if (tag && tag.mode !== 'segment') return refuse(`idmint's tag "${bizTag}" is a ${tag.mode} tag; only segment tags continue a Leaf counter`);
    return { row, bizTag, action: tag ? 'advance' : 'create', startAfter };
  });
}

/**
 * Applies one step through the admin API. Idempotent: counters only move up, and a tag already
 * above the floor is left alone (`unchanged`: nothing buffered is dropped, no segment taken).
 */
export async function applyLeafImportStep(target: ServerTarget, step: LeafImportStep): Promise<'created' | 'advanced' | 'unchanged'> {
  if (step.action === 'refuse') throw new IdmintError('BAD_REQUEST', step.reason ?? 'refused');
  if (step.action === 'advance') {
    const { countersRaised } = await call<{ countersRaised?: boolean }>(target, 'PATCH', `/v1/biz/${encodeURIComponent(step.bizTag)}`, {
      startAfter: step.startAfter,
    });
    return countersRaised === false ? 'unchanged' : 'advanced';
  }
  const description = (step.row.description || `imported from Leaf key ${step.row.key}`).slice(0, 1024);
  // A Leaf tag has no Snowflake fallback: its users expect short numbers, so a short pool falls back to Postgres.
  await call(target, 'POST', '/v1/biz', {
    bizTag: step.bizTag,
    step: Math.min(Math.max(step.row.step, 1), MAX_STEP),
    description,
    fallback: 'segment',
    startAfter: step.startAfter,
  });
  return 'created';
}

/** Reads `leaf_alloc` (or `table`) from a MySQL/MariaDB URL. */
export async function readLeafAlloc(mysqlUrl: string, table: string): Promise<LeafRow[]> {
  if (!/^[A-Za-z0-9_]{1,64}$/.test(table)) throw new BadRequestError('--table must be a plain table name', 'table');
  // Loaded only for this command: the rest of the CLI never needs a MySQL driver.
  const mysql = await import('mysql2/promise');
  let connection;
  try {
    connection = await mysql.createConnection({ uri: mysqlUrl, supportBigNumbers: true, bigNumberStrings: true });
  } catch (err) {
    throw new IdmintError(
      'NOT_READY',
      `cannot reach Leaf's database at ${redact(mysqlUrl)}: ${(err as Error).message}; check --mysql (mysql://user:password@host:3306/leaf)`,
      { cause: err },
    );
  }
  try {
    const [rows] = await connection.query(`SELECT biz_tag, max_id, step, description FROM \`${table}\` ORDER BY biz_tag`);
    return (rows as Array<{ biz_tag: string; max_id: string; step: number | string; description: string | null }>).map((r) => ({
      key: r.biz_tag,
      maxId: Number(r.max_id),
      step: Number(r.step),
      description: r.description ?? '',
    }));
  } catch (err) {
    throw new IdmintError('BAD_REQUEST', `cannot read ${table} from ${redact(mysqlUrl)}: ${(err as Error).message}`, { cause: err });
  } finally {
    await connection.end();
  }
}

const redact = (url: string): string => redactUrl(url, 'the --mysql URL');
