import { silentLogger } from '../core/logger.js';
import { checkInteger, defaults, OptionsError, resolveOptions } from '../core/options.js';
import { systemClock } from '../core/ports.js';
import type { SqlClient } from '../store/db.js';
import { LeasedWorkerIdProvider, type LeasedWorkerIdOptions } from './leased-provider.js';
import { PostgresRegistry } from './postgres-registry.js';

export interface PostgresLeaseWorkerIdProviderOptions extends LeasedWorkerIdOptions {
  /** The process's database. */
  db: SqlClient;
  /** This process's identity in the registry (`ip:port`, a pod's address). */
  identity: string;
  /** The lease, judged by the database's clock. Default 10000 ms. */
  leaseMs?: number;
}

export const POSTGRES_LEASE_WORKER_ID_DEFAULTS = defaults({ leaseMs: 10_000 });

/**
 * Worker ids leased in Postgres (`idmint_worker_lease`: a row per id with its lease, judged by the
 * database's `now()`, and its mark). Unlike PostgresWorkerIdProvider, whose fresh row per start
 * (uid-generator's, kept for `uid` tags and their 22 worker bits) uses the space up, ids here are
 * reclaimed once their lease ended. See leased-provider.ts for why no ID repeats.
 */
export class PostgresLeaseWorkerIdProvider extends LeasedWorkerIdProvider {
  constructor(options: PostgresLeaseWorkerIdProviderOptions) {
    const { db, leaseMs, ...rest } = options;
    if (!db || typeof db.query !== 'function')
      throw new OptionsError('PostgresLeaseWorkerIdProvider', 'db', 'is required: the Postgres database (DATABASE_URL) that holds the leases');
    const settings = resolveOptions(POSTGRES_LEASE_WORKER_ID_DEFAULTS, { leaseMs }, (s) => checkInteger('PostgresLeaseWorkerIdProvider', s, 'leaseMs', 100));
    const clock = rest.clock ?? systemClock;
    super(() => new PostgresRegistry({ db, leaseMs: settings.leaseMs, clock }), `pg-${rest.identity}`, { ...rest, clock, logger: rest.logger ?? silentLogger });
  }
}
