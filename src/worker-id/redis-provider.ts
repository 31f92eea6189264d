import type { Cluster, Redis } from 'ioredis';
import { silentLogger } from '../core/logger.js';
import { checkInteger, defaults, OptionsError, resolveOptions } from '../core/options.js';
import { systemClock } from '../core/ports.js';
import { LeasedWorkerIdProvider, type LeasedWorkerIdOptions } from './leased-provider.js';
import { RedisRegistry } from './redis-registry.js';

export interface RedisWorkerIdProviderOptions extends Omit<LeasedWorkerIdOptions, 'identity'> {
  redis: Redis | Cluster;
  /** Application name: part of the identity (`app:ip:port`). */
  app: string;
  /** This process's `ip:port`. */
  address: string;
  /** Prefix of the registry's keys `<prefix>{worker-ids}:…`. Default `idmint:`. */
  keyPrefix?: string;
  /** The lease: a key TTL, renewed by the holder. Default 10000 ms. */
  leaseMs?: number;
}

export const REDIS_WORKER_ID_DEFAULTS = defaults({ keyPrefix: 'idmint:', dataDir: './data', leaseMs: 10_000 });

/**
 * Worker ids leased in Redis (a record hash and a key with a TTL per lease, changed only by Lua
 * scripts). Ids are reclaimed once their lease expired; a Redis that may have lost writes makes
 * every take wait out a guard (redis-registry.ts). See leased-provider.ts for why no ID repeats.
 */
export class RedisWorkerIdProvider extends LeasedWorkerIdProvider {
  readonly redis: Readonly<Omit<RedisWorkerIdProviderOptions, 'redis'> & typeof REDIS_WORKER_ID_DEFAULTS>;
  readonly registry: RedisRegistry;

  constructor(options: RedisWorkerIdProviderOptions) {
    const { redis, ...rest } = options;
    const merged = resolveOptions(REDIS_WORKER_ID_DEFAULTS, rest, (s) => {
      if (!/^[^\s:|]+$/.test(s.app ?? ''))
        throw new OptionsError('RedisWorkerIdProvider', 'app', `must be a non-empty name without ':', '|' or spaces, got "${s.app}"`);
      if (!/^[^\s/:#|]+:\d{1,5}(#\d{1,3})?$/.test(s.address ?? ''))
        throw new OptionsError('RedisWorkerIdProvider', 'address', `must be ip:port (or ip:port#process), got "${s.address}"`);
      checkInteger('RedisWorkerIdProvider', s, 'leaseMs', 100);
    });
    const clock = merged.clock ?? systemClock;
    const registry = new RedisRegistry({ redis, keyPrefix: merged.keyPrefix, leaseMs: merged.leaseMs, clock });
    const identity = `${merged.app}:${merged.address}`;
    const { app: _app, address: _address, keyPrefix: _keyPrefix, leaseMs: _leaseMs, ...leased } = merged;
    super(() => registry, `redis-${identity}`, { ...leased, identity, clock, logger: merged.logger ?? silentLogger });
    this.redis = merged;
    this.registry = registry;
  }

  get identity(): string {
    return `${this.redis.app}:${this.redis.address}`;
  }
}
