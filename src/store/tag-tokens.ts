import { createHash, randomBytes } from 'node:crypto';
import { BadRequestError, UnknownBizTagError } from '../core/errors.js';
import type { TagAccess, TagTokenInfo, TagTokenStore } from '../core/ports.js';
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
    const { rows } = await this.db.query<{ id: string; prefix: string; created_at: Date; revoked_at: Date | null }>(
      'SELECT id::text AS id, prefix, created_at, revoked_at FROM idmint_tag_token WHERE biz_tag = $1 ORDER BY id',
      [bizTag],
    );
    return rows.map((r) => ({ id: r.id, prefix: r.prefix, createdAt: new Date(r.created_at), ...(r.revoked_at ? { revokedAt: new Date(r.revoked_at) } : {}) }));
  }

  async revoke(bizTag: string, id: string): Promise<void> {
    validateBizTag(bizTag);
    if (!/^\d{1,18}$/.test(id)) throw new BadRequestError(`token id must be a number, got "${id}"`, 'id');
    const { rows } = await this.db.query('UPDATE idmint_tag_token SET revoked_at = now() WHERE biz_tag = $1 AND id = $2 AND revoked_at IS NULL RETURNING id', [
      bizTag,
      id,
    ]);
    if (rows.length === 0) throw new BadRequestError(`tag "${bizTag}" has no live token ${id} (list them with \`idmint biz token list ${bizTag}\`)`, 'id');
  }

  async open(bizTag: string): Promise<number> {
    validateBizTag(bizTag);
    const { rows } = await this.db.query('DELETE FROM idmint_tag_token WHERE biz_tag = $1 RETURNING id', [bizTag]);
    return rows.length;
  }

  async accessAll(): Promise<Map<string, TagAccess>> {
    const { rows } = await this.db.query<{ biz_tag: string; token_hash: string | null; live: boolean | null }>(
      `SELECT b.biz_tag, t.token_hash, t.revoked_at IS NULL AS live
       FROM idmint_biz b LEFT JOIN idmint_tag_token t ON t.biz_tag = b.biz_tag WHERE b.deleted_at IS NULL`,
    );
    const all = new Map<string, { closed: boolean; hashes: string[] }>();
    for (const r of rows) {
      let access = all.get(r.biz_tag);
      if (!access) all.set(r.biz_tag, (access = { closed: false, hashes: [] }));
      if (r.token_hash === null) continue;
      access.closed = true;
      if (r.live) access.hashes.push(r.token_hash);
    }
    return all;
  }

  async access(bizTag: string): Promise<TagAccess> {
    const { rows } = await this.db.query<{ token_hash: string; live: boolean }>(
      'SELECT token_hash, revoked_at IS NULL AS live FROM idmint_tag_token WHERE biz_tag = $1',
      [bizTag],
    );
    return { closed: rows.length > 0, hashes: rows.filter((r) => r.live).map((r) => r.token_hash) };
  }
}
