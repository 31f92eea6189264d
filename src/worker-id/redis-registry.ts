import type { Cluster, Redis } from 'ioredis';
import type { Clock } from '../core/ports.js';
import { readLua } from '../redis/lua.js';
import type { RegistryListing, RenewOutcome, TakeOutcome, TakeRequest, WorkerIdRegistry } from './registry.js';

const SCRIPTS = {
  idmintLeaseTake: readLua(import.meta.url, 'worker-id', 'lease-take.lua'),
  idmintLeaseRenew: readLua(import.meta.url, 'worker-id', 'lease-renew.lua'),
  idmintLeaseRelease: readLua(import.meta.url, 'worker-id', 'lease-release.lua'),
} as const;

type Command = (...args: Array<string | number>) => Promise<unknown>;

export interface RedisRegistryOptions {
  redis: Redis | Cluster;
  /** Keys `<prefix>{worker-ids}:registry` and `<prefix>{worker-ids}:lease:<id>` (one hash slot). */
  keyPrefix: string;
  /** A lease lives this long after its last renewal reached Redis (a key TTL). */
  leaseMs: number;
  clock: Clock;
}

/**
 * The Redis registry: one hash of records (`<mark>|<holder>|<identity>` per id) and one key per
 * lease with a TTL, changed only by the Lua scripts in ./lua, so every take, renewal and release
 * is one atomic compare-and-set. Redis may lose acknowledged writes (a restart without fsync'd
 * persistence, a failover, a restore): the registry remembers the run id of the Redis that wrote
 * it, and a take on another one sets a guard, the taker's clock plus two leases, under which no
 * id is used; holders must take their ids again through it. A live holder has stopped within a
 * lease of the loss, so the guard is safe while clocks agree within a lease. A brand-new registry
 * looks the same as a lost one and gets the guard too (the first start waits two leases). Ids in
 * the earlier version's hash (`<prefix>worker-ids`) stay reserved, and its counter is sealed.
 */
export class RedisRegistry implements WorkerIdRegistry {
  readonly kind = 'redis';

  constructor(private readonly o: RedisRegistryOptions) {
    const client = o.redis as unknown as Record<string, unknown>;
    for (const [name, lua] of Object.entries(SCRIPTS)) {
      if (typeof client[name] !== 'function') o.redis.defineCommand(name, { numberOfKeys: 2, lua });
    }
  }

  get where(): string {
    return `Redis key ${this.registryKey}`;
  }

  get registryKey(): string {
    return `${this.o.keyPrefix}{worker-ids}:registry`;
  }

  leaseKey(workerId: number): string {
    return `${this.o.keyPrefix}{worker-ids}:lease:${workerId}`;
  }

  leaseMs(): number {
    return this.o.leaseMs;
  }

  /** The hash an earlier version assigned ids from (`identity -> id`, `#next`), never reused. */
  get legacyKey(): string {
    return `${this.o.keyPrefix}worker-ids`;
  }

  /**
   * Seals the earlier version's hash: its `#next` past the layout, so a process of that version
   * started now is refused instead of taking an id a lease holds.
   */
  async open(maxWorkerId: number): Promise<void> {
    const next = Number((await this.o.redis.hget(this.legacyKey, '#next')) ?? 0);
    if (next <= maxWorkerId) await this.o.redis.hset(this.legacyKey, '#next', maxWorkerId + 1);
  }

  async list(maxWorkerId: number): Promise<RegistryListing> {
    const all = await this.o.redis.hgetall(this.registryKey);
    const known = new Map<number, { identity: string; markMs: number }>();
    for (const [field, value] of Object.entries(all)) {
      const id = Number(field);
      if (field.startsWith('#') || !Number.isSafeInteger(id) || id > maxWorkerId) continue;
      const [mark = '0', , ...identity] = value.split('|');
      known.set(id, { identity: identity.join('|'), markMs: Number(mark) });
    }
    const ids = [...known.keys()];
    const leases = ids.length === 0 ? [] : await this.o.redis.mget(ids.map((id) => this.leaseKey(id)));
    const held = new Set(ids.filter((_, i) => leases[i] !== null));
    // Ids the earlier version assigned have no lease to prove their holders gone: never reused.
    const legacy = await this.o.redis.hgetall(this.legacyKey);
    const reserved = new Set(
      Object.entries(legacy)
        .filter(([field]) => !field.startsWith('#'))
        .map(([, id]) => Number(id)),
    );
    return { held, known, reserved };
  }

  async take(request: TakeRequest): Promise<TakeOutcome> {
    if (request.identity.includes('|') || request.token.includes('|')) throw new Error('a worker-id identity must not contain "|"');
    const guard = this.o.clock.now() + 2 * this.o.leaseMs;
    const reply = (await this.command('idmintLeaseTake')(
      this.registryKey,
      this.leaseKey(request.workerId),
      request.workerId,
      request.token,
      request.identity,
      this.o.leaseMs,
      guard,
      ...request.successorOf,
    )) as Array<string | number>;
    if (Number(reply[0]) !== 1) return { taken: false, heldBy: { identity: String(reply[1]), token: String(reply[2]) } };
    return { taken: true, floorMs: Number(reply[1]), guardMs: Number(reply[2]), previousHolder: reply[3] ? String(reply[3]) : null };
  }

  async renew(workerId: number, token: string, markMs: number): Promise<RenewOutcome> {
    const reply = await this.command('idmintLeaseRenew')(this.registryKey, this.leaseKey(workerId), workerId, token, this.o.leaseMs, Math.ceil(markMs));
    return Number(reply) === 1 ? 'renewed' : 'lost';
  }

  async release(workerId: number, token: string, finalMs: number): Promise<void> {
    await this.command('idmintLeaseRelease')(this.registryKey, this.leaseKey(workerId), workerId, token, Math.ceil(finalMs));
  }

  /** The client belongs to the caller (the process's Redis connection): nothing to close. */
  async close(): Promise<void> {}

  private command(name: keyof typeof SCRIPTS): Command {
    const fn = (this.o.redis as unknown as Record<string, Command>)[name]!;
    return fn.bind(this.o.redis);
  }
}
