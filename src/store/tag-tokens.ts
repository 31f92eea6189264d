import { createHash, randomBytes } from 'node:crypto';
import { BadRequestError, UnknownBizTagError } from '../core/errors.js';
import type { TagTokenInfo, TagTokenStore } from '../core/ports.js';
import type { SqlClient } from './db.js';
import { validateBizTag } from './validate.js';

/** SHA-256 hex of a token: what is stored and compared (tokens are random, so no salt is needed). */
export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

const PREFIX_LENGTH = 8;

/** Tag tokens in Postgres (or PGlite): `idmint_tag_token`, hashes only. */
export class PostgresTagTokenStore implements TagTokenStore {
  constructor(private readonly db: SqlClient) {}

  async create(bizTag: string): Promise<TagTokenInfo & { token: string }> {
    validateBizTag(bizTag);
    const token = `imt_${randomBytes(24).toString('base64url')}`;
    const { rows } = await this.db.query<{ id: string; created_at: Date }>(
      `INSERT INTO idmint_tag_token (biz_tag, token_hash, prefix)
       SELECT biz_tag, $2, $3 FROM idmint_biz WHERE biz_tag = $1 AND deleted_at IS NULL
       RETURNING id::text AS id, created_at`,
      [bizTag, hashToken(token), token.slice(0, PREFIX_LENGTH)],
    );
    const row = rows[0];
    if (!row) throw new UnknownBizTagError(bizTag);
    return { id: row.id, prefix: token.slice(0, PREFIX_LENGTH), createdAt: new Date(row.created_at), token };
  }

  async list(bizTag: string): Promise<TagTokenInfo[]> {
    validateBizTag(bizTag);
    const { rows } = await this.db.query<{ id: string; prefix: string; created_at: Date }>(
      'SELECT id::text AS id, prefix, created_at FROM idmint_tag_token WHERE biz_tag = $1 ORDER BY id',
      [bizTag],
    );
    return rows.map((r) => ({ id: r.id, prefix: r.prefix, createdAt: new Date(r.created_at) }));
  }

  async revoke(bizTag: string, id: string): Promise<void> {
    validateBizTag(bizTag);
    if (!/^\d{1,18}$/.test(id)) throw new BadRequestError(`token id must be a number, got "${id}"`, 'id');
    const { rows } = await this.db.query('DELETE FROM idmint_tag_token WHERE biz_tag = $1 AND id = $2 RETURNING id', [bizTag, id]);
    if (rows.length === 0) throw new BadRequestError(`tag "${bizTag}" has no token ${id}`, 'id');
  }

  async hashes(bizTag: string): Promise<string[]> {
    const { rows } = await this.db.query<{ token_hash: string }>('SELECT token_hash FROM idmint_tag_token WHERE biz_tag = $1', [bizTag]);
    return rows.map((r) => r.token_hash);
  }
}
