import { BadRequestError } from '../core/errors.js';
import type { SqlClient } from './db.js';

/** uid-generator's WorkerNodeType: 1 = container, 2 = actual machine. */
export const WORKER_NODE_TYPE = Object.freeze({ CONTAINER: 1, ACTUAL: 2 } as const);

export interface WorkerNodeInput {
  hostName: string;
  port: string;
  /** WORKER_NODE_TYPE; default ACTUAL. */
  type?: number;
  /** Default: today on the database server. */
  launchDate?: Date;
}

export interface WorkerNode {
  readonly id: number;
  readonly hostName: string;
  readonly port: string;
  readonly type: number;
  readonly launchDate: Date;
  readonly createdAt: Date;
}

/** The worker-node table (uid-generator's WORKER_NODE): every insert is a new worker id, never reused. */
export class WorkerNodeRepository {
  constructor(private readonly db: SqlClient) {}

  /** Inserts a row for a starting process and returns its serial, the worker id. */
  async insert(input: WorkerNodeInput): Promise<number> {
    if (typeof input.hostName !== 'string' || input.hostName === '') throw new BadRequestError('hostName must be a non-empty string', 'hostName');
    if (typeof input.port !== 'string') throw new BadRequestError('port must be a string', 'port');
    const type = input.type ?? WORKER_NODE_TYPE.ACTUAL;
    if (!Number.isSafeInteger(type)) throw new BadRequestError('type must be an integer', 'type');
    const { rows } = await this.db.query<{ id: bigint }>(
      'INSERT INTO idmint_worker_node (host_name, port, type, launch_date) VALUES ($1, $2, $3, COALESCE($4::date, CURRENT_DATE)) RETURNING id',
      [input.hostName, input.port, type, input.launchDate ?? null],
    );
    return Number(rows[0]!.id);
  }

  async get(id: number): Promise<WorkerNode | null> {
    const { rows } = await this.db.query<{ id: bigint; host_name: string; port: string; type: number; launch_date: Date; created_at: Date }>(
      'SELECT id, host_name, port, type, launch_date, created_at FROM idmint_worker_node WHERE id = $1',
      [id],
    );
    const r = rows[0];
    return r
      ? Object.freeze({ id: Number(r.id), hostName: r.host_name, port: r.port, type: r.type, launchDate: r.launch_date, createdAt: r.created_at })
      : null;
  }
}
