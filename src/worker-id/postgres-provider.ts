import { IdmintError } from '../core/errors.js';
import type { WorkerIdLease, WorkerIdProvider } from '../core/ports.js';
import { silentLogger, type Logger } from '../core/logger.js';
import type { SqlClient } from '../store/db.js';
import { WORKER_NODE_TYPE, WorkerNodeRepository } from '../store/worker-node-repository.js';
import { checkWorkerIdRange, SimpleLease } from './lease.js';
import { defaults, OptionsError, resolveOptions } from '../core/options.js';

export interface PostgresWorkerIdProviderOptions {
  /** A migrated database (it has `idmint_worker_node`). */
  db: SqlClient;
  /** Recorded in the row, as uid-generator's HOST_NAME. */
  host: string;
  /** Recorded in the row, as uid-generator's PORT (a string: containers put a timestamp there). */
  port: string | number;
  /** WORKER_NODE_TYPE: 1 container, 2 actual machine. Default 2. */
  type?: number;
  logger?: Logger;
}

export const POSTGRES_WORKER_ID_DEFAULTS = defaults({ type: WORKER_NODE_TYPE.ACTUAL as number });

/**
 * uid-generator's DisposableWorkerIdAssigner: every start inserts a new worker-node row and its
 * serial is the worker id. Ids are never reused, so a restart with a stepped-back clock cannot
 * repeat IDs and no local mark is needed; the price is that the id space is used up by restarts.
 */
export class PostgresWorkerIdProvider implements WorkerIdProvider {
  readonly options: Readonly<Omit<PostgresWorkerIdProviderOptions, 'db' | 'logger'> & { type: number }>;
  private readonly repo: WorkerNodeRepository;
  private readonly logger: Logger;

  constructor(options: PostgresWorkerIdProviderOptions) {
    const { db, logger, ...rest } = options;
    if (!db || typeof db.query !== 'function')
      throw new OptionsError('PostgresWorkerIdProvider', 'db', 'is required: the Postgres database (DATABASE_URL) whose WORKER_NODE table gives the ids');
    this.options = resolveOptions(POSTGRES_WORKER_ID_DEFAULTS, rest);
    this.repo = new WorkerNodeRepository(db);
    this.logger = (logger ?? silentLogger).child({ component: 'worker-id-postgres' });
  }

  async acquire({ maxWorkerId }: { maxWorkerId: number }): Promise<WorkerIdLease> {
    const { host, port, type } = this.options;
    let workerId: number;
    try {
      workerId = await this.repo.insert({ hostName: host, port: String(port), type });
    } catch (err) {
      if (err instanceof IdmintError) throw err;
      throw new IdmintError('WORKER_ID_UNAVAILABLE', `could not register a worker node in Postgres: ${(err as Error).message}`, { cause: err });
    }
    checkWorkerIdRange(workerId, maxWorkerId, 'Postgres idmint_worker_node');
    this.logger.info({ workerId, host, port }, 'worker id assigned by Postgres');
    return new SimpleLease(workerId, 'postgres', null);
  }
}
