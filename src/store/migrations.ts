import { silentLogger, type Logger } from '../core/logger.js';
import type { Database } from './db.js';

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

/**
 * Append-only: never edit or reorder a released migration, add the next number instead.
 * The same SQL runs on Postgres 15 and PGlite (Postgres 18). Each statement ends with `;` at the
 * end of a line (PGlite's extended protocol takes one statement per query).
 */
export const MIGRATIONS: readonly Migration[] = Object.freeze([
  {
    version: 1,
    name: 'initial',
    sql: `
CREATE TABLE idmint_biz (
  biz_tag      text PRIMARY KEY CHECK (biz_tag ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
  mode         text NOT NULL DEFAULT 'segment' CHECK (mode IN ('segment', 'snowflake', 'uid', 'sharded')),
  step         integer NOT NULL DEFAULT 1000 CHECK (step > 0),
  current_step integer NOT NULL DEFAULT 1000 CHECK (current_step > 0),
  max_limit    bigint NULL CHECK (max_limit IS NULL OR (max_limit >= 1 AND max_limit <= 9007199254740991)),
  shards       integer NOT NULL DEFAULT 1 CHECK (shards BETWEEN 1 AND 64),
  fallback     text NOT NULL DEFAULT 'snowflake' CHECK (fallback IN ('segment', 'snowflake', 'error')),
  pool         text NOT NULL DEFAULT 'auto' CHECK (pool IN ('auto', 'memory', 'redis-list', 'redis-counter', 'kafka')),
  description  text NOT NULL DEFAULT '',
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  deleted_at   timestamptz NULL
);

-- max_id is the last ID handed out for (tag, shard); segments are (max_id - step, max_id].
CREATE TABLE idmint_segment (
  biz_tag    text NOT NULL REFERENCES idmint_biz (biz_tag),
  shard      integer NOT NULL CHECK (shard BETWEEN 0 AND 63),
  max_id     bigint NOT NULL DEFAULT 0 CHECK (max_id >= 0 AND max_id <= 9007199254740991),
  step       integer NOT NULL DEFAULT 0 CHECK (step >= 0),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (biz_tag, shard)
);

CREATE TABLE idmint_ledger (
  id           bigserial PRIMARY KEY,
  biz_tag      text NOT NULL,
  shard        integer NOT NULL,
  start_id     bigint NOT NULL CHECK (start_id >= 1),
  end_id       bigint NOT NULL CHECK (end_id >= start_id AND end_id <= 9007199254740991),
  allocated_at timestamptz NOT NULL DEFAULT now(),
  allocated_by text NOT NULL DEFAULT '',
  -- A second line of defence for invariant 3: no range can start twice.
  UNIQUE (biz_tag, shard, start_id)
);

-- uid-generator's WORKER_NODE: the serial id is the worker id.
CREATE TABLE idmint_worker_node (
  id          bigserial PRIMARY KEY,
  host_name   text NOT NULL,
  port        text NOT NULL,
  type        integer NOT NULL,
  launch_date date NOT NULL DEFAULT CURRENT_DATE,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
`,
  },
  {
    version: 2,
    name: 'tag tokens',
    sql: `
CREATE TABLE idmint_tag_token (
  id         bigserial PRIMARY KEY,
  biz_tag    text NOT NULL REFERENCES idmint_biz (biz_tag),
  token_hash text NOT NULL UNIQUE,
  prefix     text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idmint_tag_token_biz ON idmint_tag_token (biz_tag);
`,
  },
  {
    version: 3,
    name: 'tag format',
    sql: `
ALTER TABLE idmint_biz ADD COLUMN format text NOT NULL DEFAULT 'decimal';
`,
  },
  {
    version: 4,
    name: 'settings',
    sql: `
-- Facts every process of a deployment must agree on (the obfuscation key's fingerprint, the
-- region layout): the first process records its value, every later one compares with it.
CREATE TABLE idmint_setting (
  name        text PRIMARY KEY,
  value       text NOT NULL,
  recorded_at timestamptz NOT NULL DEFAULT now(),
  recorded_by text NOT NULL DEFAULT ''
);
`,
  },
  {
    version: 5,
    name: 'revoked tag tokens',
    sql: `
-- A revoked token is kept (revoked_at set), so a tag whose tokens were all revoked stays closed
-- until an admin opens it (DELETE /v1/biz/:bizTag/tokens removes every row).
ALTER TABLE idmint_tag_token ADD COLUMN revoked_at timestamptz;
`,
  },
  {
    version: 6,
    name: 'tag floor',
    sql: `
-- The highest startAfter ever applied to a tag: a later one at or below it changes nothing (an
-- import run twice), so no buffered ID is dropped and no segment is taken for it.
ALTER TABLE idmint_biz ADD COLUMN start_after bigint NOT NULL DEFAULT 0;
`,
  },
  {
    version: 7,
    name: 'regions',
    sql: `
-- One row when this database is one region of several (src/core/region.ts): recorded at the first
-- start with IDMINT_REGIONS, checked at every start after. No row: one region, the plain counter.
CREATE TABLE idmint_region (
  one         boolean PRIMARY KEY DEFAULT true CHECK (one),
  regions     integer NOT NULL CHECK (regions BETWEEN 2 AND 64),
  region      integer NOT NULL CHECK (region >= 0 AND region < regions),
  stripe      bigint NOT NULL CHECK (stripe >= 1 AND stripe * regions <= 9007199254740991),
  recorded_at timestamptz NOT NULL DEFAULT now(),
  recorded_by text NOT NULL DEFAULT '',
  -- Set on region 0 of a deployment that was one region before (idmint regions apply): when the
  -- floors below were taken.
  floors_at   timestamptz NULL
);

-- Region 0 of a former single region: each tag's counter when it became region 0. Every other
-- region starts the tag above it (its IDs up to there were handed out from every stripe).
CREATE TABLE idmint_region_floor (
  biz_tag text PRIMARY KEY,
  floor   bigint NOT NULL CHECK (floor >= 0)
);

-- Each counter carries its region's layout (NULL: one region), copied from idmint_region: the
-- allocation reads it from the row it updates, so a layout recorded while processes run (regions
-- apply) reaches every allocation that has not yet taken the row, and costs a plain counter nothing.
ALTER TABLE idmint_segment ADD COLUMN regions integer NULL;
ALTER TABLE idmint_segment ADD COLUMN region integer NULL;
ALTER TABLE idmint_segment ADD COLUMN stripe bigint NULL;
`,
  },
  {
    version: 8,
    name: 'deployment record and change feed',
    sql: `
-- Each live process reports what it holds of the deployment record (idmint_setting) every few
-- seconds: \`idmint deployment show\` says which processes still hold an old value.
CREATE TABLE idmint_process (
  id         text PRIMARY KEY,
  address    text NOT NULL,
  roles      text NOT NULL,
  view       text NOT NULL DEFAULT '{}',
  started_at timestamptz NOT NULL DEFAULT now(),
  seen_at    timestamptz NOT NULL DEFAULT now()
);

-- The fingerprint of the key an obfuscated tag was created with: a process with another key
-- refuses the tag, whatever happens to the deployment's own row. Tags of before get the recorded one.
ALTER TABLE idmint_biz ADD COLUMN key_fingerprint text NULL;
UPDATE idmint_biz SET key_fingerprint = (SELECT value FROM idmint_setting WHERE name = 'obfuscation-key-fingerprint') WHERE format LIKE 'obfuscated%';

-- The change feed: a change to a tag, its tokens, the record or the region split is pushed to
-- every process (LISTEN idmint_changes), which drops what it cached within ~100 ms.
CREATE FUNCTION idmint_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify('idmint_changes', json_build_object('schema', TG_TABLE_SCHEMA, 'table', TG_TABLE_NAME, 'bizTag', COALESCE(to_jsonb(NEW), to_jsonb(OLD)) ->> 'biz_tag')::text); RETURN NULL; END $$;
CREATE TRIGGER idmint_biz_changed AFTER INSERT OR UPDATE OR DELETE ON idmint_biz FOR EACH ROW EXECUTE FUNCTION idmint_notify_change();
CREATE TRIGGER idmint_tag_token_changed AFTER INSERT OR UPDATE OR DELETE ON idmint_tag_token FOR EACH ROW EXECUTE FUNCTION idmint_notify_change();
CREATE TRIGGER idmint_setting_changed AFTER INSERT OR UPDATE OR DELETE ON idmint_setting FOR EACH ROW EXECUTE FUNCTION idmint_notify_change();
CREATE TRIGGER idmint_region_changed AFTER INSERT OR UPDATE OR DELETE ON idmint_region FOR EACH ROW EXECUTE FUNCTION idmint_notify_change();
`,
  },
]);

/** First key of the two-key advisory lock; the second is the schema, so schemas migrate independently. */
const LOCK_CLASS = 0x1d_4d17;

/**
 * Applies the migrations the database lacks, in order, in one transaction under an advisory lock,
 * so several processes starting at once apply each migration exactly once. Returns the versions applied.
 */
export async function migrate(db: Database, logger: Logger = silentLogger, migrations: readonly Migration[] = MIGRATIONS): Promise<number[]> {
  const log = logger.child({ component: 'migrate' });
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))', [LOCK_CLASS]);
    await tx.query(`CREATE TABLE IF NOT EXISTS idmint_migrations (
      version    integer PRIMARY KEY,
      name       text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const { rows } = await tx.query<{ version: number }>('SELECT version FROM idmint_migrations');
    const done = new Set(rows.map((r) => r.version));
    const applied: number[] = [];
    for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
      if (done.has(m.version)) continue;
      log.info({ version: m.version, migration: m.name }, 'applying migration');
      for (const statement of splitStatements(m.sql)) await tx.query(statement);
      await tx.query('INSERT INTO idmint_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
      applied.push(m.version);
    }
    return applied;
  });
}

/** Splits a migration at `;` line ends, dropping comment-only pieces. */
export function splitStatements(sql: string): string[] {
  return sql
    .split(/;[ \t]*(?:\r?\n|$)/)
    .map((s) => s.trim())
    .filter((s) => s.split('\n').some((line) => line.trim() !== '' && !line.trim().startsWith('--')));
}
