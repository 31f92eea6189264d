import { randomUUID } from 'node:crypto';
import { NOT_SET, RECORDED_SETTINGS, type DeploymentSetting, type DeploymentView, type RecordState } from '../core/deployment.js';
import type { Database, SqlClient } from './db.js';
import { readRegionRecord } from './region-record.js';

/**
 * The deployment record in Postgres (src/core/deployment.ts says what it holds and why): one row
 * per setting in `idmint_setting`, a `deployment` row listing every setting ever recorded (so a
 * row deleted by hand is told from one never recorded), the region split from `idmint_region`,
 * and `idmint_process`, where each live process reports what it holds every few seconds.
 */

/** The row that lists what the record ever held. */
const MARKER = 'deployment';
/** The generated ZooKeeper credential, when the deployment has no IDMINT_ZK_AUTH: a secret, never shown. */
export const ZK_CREDENTIAL_SETTING = 'zookeeper-credential';
/** The signing keys (src/app/signing.ts): secrets, never shown; `idmint keys public` prints their public halves. */
export const SIGNING_KEYS_SETTING = 'signing-keys';

interface Marker {
  id: string;
  recorded: DeploymentSetting[];
}

export interface ProcessReport {
  /** Unique per process start. */
  readonly id: string;
  /** host:port (and role), as /dashboard names it. */
  readonly address: string;
  readonly roles: string;
  readonly view: DeploymentView;
}

export interface LiveProcess extends ProcessReport {
  readonly startedAt: Date;
  readonly seenAt: Date;
}

export class PostgresDeploymentRecord {
  constructor(
    private readonly db: Database,
    private readonly by: string,
  ) {}

  /** The record as it is now, the region split included (`single` without one). */
  async read(client: SqlClient = this.db): Promise<RecordState & { id: string | undefined; recordedAt: Map<string, Date> }> {
    const { rows } = await client.query<{ name: string; value: string; recorded_at: Date }>(
      'SELECT name, value, recorded_at FROM idmint_setting WHERE name = ANY($1)',
      [[MARKER, ...RECORDED_SETTINGS]],
    );
    const values: DeploymentView = {};
    const recordedAt = new Map<string, Date>();
    let marker: Marker | undefined;
    for (const row of rows) {
      if (row.name === MARKER) marker = parseMarker(row.value);
      else {
        values[row.name as DeploymentSetting] = row.value;
        recordedAt.set(row.name, row.recorded_at);
      }
    }
    const region = await readRegionRecord(client);
    values.region = region ? regionValue(region) : 'single';
    return { values, ever: new Set(marker?.recorded ?? []), id: marker?.id, recordedAt };
  }

  /**
   * Records the settings of `view` the record never held (the first process to use one records
   * it), in one transaction under the marker row's lock. A setting that was recorded and removed
   * is not recorded again here: only `set` restores it.
   */
  async claim(view: DeploymentView): Promise<void> {
    await this.db.transaction(async (tx) => {
      const marker = await lockMarker(tx);
      const { rows } = await tx.query<{ name: string }>('SELECT name FROM idmint_setting WHERE name = ANY($1)', [RECORDED_SETTINGS]);
      const present = new Set(rows.map((r) => r.name));
      // Rows recorded before the marker existed (an upgrade) count as ever recorded.
      const ever = new Set<DeploymentSetting>([...marker.recorded, ...RECORDED_SETTINGS.filter((s) => present.has(s))]);
      for (const setting of RECORDED_SETTINGS) {
        const value = view[setting];
        if (value === undefined || value === NOT_SET || ever.has(setting)) continue;
        await tx.query('INSERT INTO idmint_setting (name, value, recorded_by) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING', [setting, value, this.by]);
        ever.add(setting);
      }
      await writeMarker(tx, { id: marker.id, recorded: [...ever] });
    });
  }

  /** An explicit change (`idmint deployment set`): the value recorded now, or removed with undefined. Returns the value before. */
  async set(setting: DeploymentSetting, value: string | undefined): Promise<string | undefined> {
    if (setting === 'region') throw new Error('the region split is changed with `idmint regions apply`, not here');
    return this.db.transaction(async (tx) => {
      const marker = await lockMarker(tx);
      const { rows } = await tx.query<{ value: string }>('SELECT value FROM idmint_setting WHERE name = $1', [setting]);
      if (value === undefined) await tx.query('DELETE FROM idmint_setting WHERE name = $1', [setting]);
      else {
        await tx.query(
          'INSERT INTO idmint_setting (name, value, recorded_by) VALUES ($1, $2, $3) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, recorded_at = now(), recorded_by = EXCLUDED.recorded_by',
          [setting, value, this.by],
        );
      }
      await writeMarker(tx, { id: marker.id, recorded: [...new Set([...marker.recorded, setting])] });
      return rows[0]?.value;
    });
  }

  /** The deployment's id (created with the record): names what it owns in a shared server, e.g. its fence root. */
  async id(): Promise<string> {
    return this.db.transaction(async (tx) => (await lockMarker(tx)).id);
  }

  /** Whether this database has handed out segments before (its fence marks, if any, are where it kept them). */
  async countersUsed(): Promise<boolean> {
    const { rows } = await this.db.query('SELECT 1 FROM idmint_segment WHERE max_id > 0 LIMIT 1');
    return rows.length > 0;
  }

  /** Whether any tag was ever created here (deleted ones count). */
  async hasTags(): Promise<boolean> {
    const { rows } = await this.db.query('SELECT 1 FROM idmint_biz LIMIT 1');
    return rows.length > 0;
  }

  /** The deployment's generated ZooKeeper credential: the one recorded, or `generated` when none is (and none was). */
  async claimCredential(generated: string): Promise<string> {
    await this.db.query('INSERT INTO idmint_setting (name, value, recorded_by) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING', [
      ZK_CREDENTIAL_SETTING,
      generated,
      this.by,
    ]);
    const { rows } = await this.db.query<{ value: string }>('SELECT value FROM idmint_setting WHERE name = $1', [ZK_CREDENTIAL_SETTING]);
    return rows[0]?.value ?? generated;
  }

  async credential(): Promise<string | undefined> {
    return this.secret(ZK_CREDENTIAL_SETTING);
  }

  /** A secret row (a credential, the signing keys), or undefined. */
  async secret(name: string): Promise<string | undefined> {
    const { rows } = await this.db.query<{ value: string }>('SELECT value FROM idmint_setting WHERE name = $1', [name]);
    return rows[0]?.value;
  }

  /** Records a secret row unless one is there; returns the one recorded (first writer wins). */
  async claimSecret(name: string, value: string): Promise<string> {
    await this.db.query('INSERT INTO idmint_setting (name, value, recorded_by) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING', [name, value, this.by]);
    return (await this.secret(name)) ?? value;
  }

  /** Writes a secret row and, in the same transaction, a recorded setting (a key rotation: the keys and the current key's id). */
  async setSecretWith(name: string, value: string, setting: DeploymentSetting, settingValue: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      const marker = await lockMarker(tx);
      await tx.query(
        'INSERT INTO idmint_setting (name, value, recorded_by) VALUES ($1, $2, $3) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, recorded_at = now(), recorded_by = EXCLUDED.recorded_by',
        [name, value, this.by],
      );
      await tx.query(
        'INSERT INTO idmint_setting (name, value, recorded_by) VALUES ($1, $2, $3) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, recorded_at = now(), recorded_by = EXCLUDED.recorded_by',
        [setting, settingValue, this.by],
      );
      await writeMarker(tx, { id: marker.id, recorded: [...new Set([...marker.recorded, setting])] });
    });
  }

  /** This process is alive and holds `view`; reports older than an hour are removed on the way. */
  async heartbeat(report: ProcessReport): Promise<void> {
    await this.db.query(
      `INSERT INTO idmint_process (id, address, roles, view) VALUES ($1, $2, $3, $4)
       ON CONFLICT (id) DO UPDATE SET seen_at = now(), view = EXCLUDED.view`,
      [report.id, report.address, report.roles, JSON.stringify(report.view)],
    );
    if (Math.random() < 0.05) await this.db.query("DELETE FROM idmint_process WHERE seen_at < now() - interval '1 hour'");
  }

  /** A stopping process is no longer live. */
  async leave(id: string): Promise<void> {
    await this.db.query('DELETE FROM idmint_process WHERE id = $1', [id]);
  }

  /** Processes that reported within `withinMs` (by the database's clock). */
  async live(withinMs: number): Promise<LiveProcess[]> {
    const { rows } = await this.db.query<{ id: string; address: string; roles: string; view: string; started_at: Date; seen_at: Date }>(
      "SELECT id, address, roles, view, started_at, seen_at FROM idmint_process WHERE seen_at >= now() - ($1::integer * interval '1 millisecond') ORDER BY address, started_at",
      [withinMs],
    );
    return rows.map((r) => ({ id: r.id, address: r.address, roles: r.roles, view: parseView(r.view), startedAt: r.started_at, seenAt: r.seen_at }));
  }
}

export function regionValue(layout: { regions: number; region: number; stripe: number }): string {
  return `region ${layout.region} of ${layout.regions}, stripe ${layout.stripe}`;
}

async function lockMarker(tx: SqlClient): Promise<Marker> {
  await tx.query('INSERT INTO idmint_setting (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [
    MARKER,
    JSON.stringify({ id: randomUUID(), recorded: [] }),
  ]);
  const { rows } = await tx.query<{ value: string }>('SELECT value FROM idmint_setting WHERE name = $1 FOR UPDATE', [MARKER]);
  return parseMarker(rows[0]!.value);
}

async function writeMarker(tx: SqlClient, marker: Marker): Promise<void> {
  await tx.query('UPDATE idmint_setting SET value = $2 WHERE name = $1', [MARKER, JSON.stringify(marker)]);
}

function parseMarker(text: string): Marker {
  try {
    const m = JSON.parse(text) as Partial<Marker>;
    const recorded = Array.isArray(m.recorded)
      ? m.recorded.filter((s): s is DeploymentSetting => (RECORDED_SETTINGS as readonly string[]).includes(s as string))
      : [];
    return { id: typeof m.id === 'string' ? m.id : 'unknown', recorded };
  } catch {
    return { id: 'unknown', recorded: [] };
  }
}

function parseView(text: string): DeploymentView {
  try {
    const v = JSON.parse(text) as Record<string, unknown>;
    return Object.fromEntries(Object.entries(v).filter(([, x]) => typeof x === 'string')) as DeploymentView;
  } catch {
    return {};
  }
}
