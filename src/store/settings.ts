import { hostname } from 'node:os';
import type { SettingRegistry } from '../core/ports.js';
import type { SqlClient } from './db.js';

/** `idmint_setting` in Postgres (or PGlite): the first value recorded under a name wins. */
export class PostgresSettings implements SettingRegistry {
  constructor(
    private readonly db: SqlClient,
    private readonly by: string = `${hostname()}:${process.pid}`,
  ) {}

  async claim(name: string, value: string): Promise<string> {
    await this.db.query('INSERT INTO idmint_setting (name, value, recorded_by) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING', [name, value, this.by]);
    const recorded = await this.get(name);
    // Deleted between the two statements by an operator: ours is as good as any.
    return recorded ?? value;
  }

  async get(name: string): Promise<string | undefined> {
    const { rows } = await this.db.query<{ value: string }>('SELECT value FROM idmint_setting WHERE name = $1', [name]);
    return rows[0]?.value;
  }
}
