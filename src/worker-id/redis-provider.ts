import { readLua } from '../redis/lua.js';
import type { Redis } from 'ioredis';
import { IdmintError } from '../core/errors.js';
import { systemClock, type Clock, type WorkerIdLease, type WorkerIdProvider } from '../core/ports.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { checkWorkerIdRange, SimpleLease } from './lease.js';
import { defaults, resolveOptions } from '../core/options.js';
import { LocalTimeMark, localMarkPath, readLocalMark } from './local-time-mark.js';

const ASSIGN_SCRIPT = readLua(import.meta.url, 'worker-id', 'assign-worker-id.lua');

export interface RedisWorkerIdProviderOptions {
  redis: Redis;
  /** Application name: worker ids are unique per app. */
  app: string;
  /** This process's `ip:port`. */
  address: string;
  /** Prefix of the hash key `<prefix>worker-ids`. Default `idmint:`. */
  keyPrefix?: string;
  /** Cached id and clock mark. Default `./data`. */
  dataDir?: string;
  clock?: Clock;
  logger?: Logger;
  markAheadMs?: number;
  maxStartWaitMs?: number;
}

export const REDIS_WORKER_ID_DEFAULTS = defaults({ keyPrefix: 'idmint:', dataDir: './data' });

type AssignCommand = (key: string, identity: string, maxWorkerId: number) => Promise<number>;

/**
 * Worker ids from a Redis hash `app:ip:port -> id`, assigned by one Lua script so concurrent
 * starts never share an id. Redis down at start falls back to the cached id in the local file.
 */
export class RedisWorkerIdProvider implements WorkerIdProvider {
  readonly options: Readonly<Omit<RedisWorkerIdProviderOptions, 'redis'> & typeof REDIS_WORKER_ID_DEFAULTS & { clock: Clock; logger: Logger }>;
  private readonly redis: Redis;

  constructor(options: RedisWorkerIdProviderOptions) {
    const { redis, ...rest } = options;
    if (!/^[^\s:]+$/.test(rest.app ?? '')) throw new IdmintError('BAD_REQUEST', `app must be a non-empty name without ':' or spaces, got "${rest.app}"`, { details: { field: 'app' } });
    if (!/^[^\s/:#]+:\d{1,5}(#\d{1,3})?$/.test(rest.address ?? '')) throw new IdmintError('BAD_REQUEST', `address must be ip:port (or ip:port#process), got "${rest.address}"`, { details: { field: 'address' } });
    const merged = resolveOptions({ ...REDIS_WORKER_ID_DEFAULTS, clock: systemClock, logger: silentLogger }, rest);
    this.options = Object.freeze({ ...merged, logger: merged.logger.child({ component: 'worker-id-redis' }) });
    this.redis = redis;
    if (typeof (redis as unknown as { idmintAssignWorkerId?: unknown }).idmintAssignWorkerId !== 'function') {
      redis.defineCommand('idmintAssignWorkerId', { numberOfKeys: 1, lua: ASSIGN_SCRIPT });
    }
  }

  get hashKey(): string {
    return `${this.options.keyPrefix}worker-ids`;
  }

  get identity(): string {
    return `${this.options.app}:${this.options.address}`;
  }

  async acquire({ maxWorkerId }: { maxWorkerId: number }): Promise<WorkerIdLease> {
    const o = this.options;
    checkWorkerIdRange(0, maxWorkerId, 'the layout');
    const key = `redis-${this.identity}`;
    const path = localMarkPath(o.dataDir, key);
    const previous = readLocalMark(path);
    let workerId: number;
    try {
      const assign = (this.redis as unknown as { idmintAssignWorkerId: AssignCommand }).idmintAssignWorkerId.bind(this.redis);
      workerId = Number(await assign(this.hashKey, this.identity, maxWorkerId));
    } catch (err) {
      if (!previous) {
        throw new IdmintError('WORKER_ID_UNAVAILABLE', `Redis is unreachable and there is no cached worker id in ${path}: ${(err as Error).message}`, { cause: err, details: { path } });
      }
      o.logger.warn({ err, workerId: previous.workerId, path }, 'Redis unreachable at start; using the cached worker id');
      workerId = previous.workerId;
    }
    if (workerId === -1) {
      throw new IdmintError('WORKER_ID_UNAVAILABLE', `no worker id left for ${this.identity} in Redis hash ${this.hashKey}: all of 0..${maxWorkerId} are assigned`, {
        details: { identity: this.identity, maxWorkerId },
      });
    }
    checkWorkerIdRange(workerId, maxWorkerId, `Redis hash ${this.hashKey}`);
    const mark = await LocalTimeMark.start({ ...o, key, workerId, source: 'redis', previous });
    o.logger.info({ workerId, identity: this.identity }, 'worker id assigned by Redis');
    return new SimpleLease(workerId, 'redis', mark);
  }
}
