import { Redis, type RedisOptions } from 'ioredis';
import { Episode } from '../../core/episode.js';
import { silentLogger, type Logger } from '../../core/logger.js';
import { settleDroppedCommands } from '../../redis/dropped-commands.js';
import { clusterClient } from '../../redis/cluster.js';
import { defineScripts } from './scripts.js';
import { backoffMs } from '../../core/retry.js';

/** A new ioredis client for a URL, for options alone (Sentinel) or for a Cluster's nodes, with `extra` options over them. */
export function redisClientFor(
  target: { url?: string | undefined; options?: RedisOptions | undefined; cluster?: Array<{ host: string; port: number }> | undefined },
  extra: RedisOptions = {},
): Redis {
  if (target.cluster) return clusterClient(target.cluster, { ...target.options, ...extra });
  return target.url ? new Redis(target.url, { ...target.options, ...extra }) : new Redis({ ...target.options, ...extra });
}

export interface RedisConnectionOptions {
  /** A Redis URL; or leave it out and give `redis` (e.g. Sentinel's `sentinels` and `name`). */
  url?: string;
  /** ioredis options every client of the connection starts from (TLS, Sentinel, credentials). */
  redis?: RedisOptions;
  /** Redis Cluster: the nodes to start from (`redis` then applies to each node). */
  cluster?: Array<{ host: string; port: number }>;
  logger?: Logger;
}

/**
 * The process's Redis clients, opened once and shared by every role (as BullMQ's RedisConnection
 * is), with every pool script defined on them when they open:
 * - `fast` serves takes. A take in flight when Redis dies fails within a second and the dispenser
 *   falls back; it is never resent on reconnect (it may have run: its IDs become a gap, never a repeat).
 * - `patient` pushes refills, keeps pool metadata and carries the BullMQ queue. It waits for Redis
 *   rather than failing, but never resends a command whose reply was lost: a push that may have run
 *   fails its job, and the retry takes a new segment (invariant 3).
 * BullMQ's worker opens its own blocking connection with `patient.duplicate()`; both settle a
 * command the connection dropped (src/redis/dropped-commands.ts).
 */
export class RedisConnection {
  readonly fast: Redis;
  readonly patient: Redis;
  private readonly log: Logger;
  private closed = false;

  constructor(options: RedisConnectionOptions) {
    this.log = (options.logger ?? silentLogger).child({ component: 'redis' });
    const target = { url: options.url, options: options.redis, cluster: options.cluster };
    this.fast = redisClientFor(target, {
      maxRetriesPerRequest: 1,
      autoResendUnfulfilledCommands: false,
      commandTimeout: 1000,
      connectTimeout: 2000,
      // Reconnects 200 ms × n apart, at most 2 s (ioredis counts `times` from 1).
      retryStrategy: (times) => backoffMs(times - 1, { initialMs: 200, growth: 'linear', maxMs: 2000 }),
    });
    this.patient = redisClientFor(target, { maxRetriesPerRequest: null, autoResendUnfulfilledCommands: false });
    // Without this a command in flight when Redis dies is never settled (an ioredis bug).
    settleDroppedCommands(this.fast);
    settleDroppedCommands(this.patient);
    defineScripts(this.fast);
    defineScripts(this.patient);
    // ioredis emits 'error' on every failed reconnect; without a listener node would crash.
    for (const client of [this.fast, this.patient]) client.on('error', (err: Error) => this.log.debug({ err: err.message }, 'redis connection error'));
    // Every failed reconnect closes the socket again: one episode, not a line per attempt.
    const lost = new Episode(this.log, "redis connection lost; serving by each tag's fallback", { dependency: 'redis' });
    this.fast.on('ready', () => lost.recover());
    this.fast.on('close', () => {
      if (!this.closed) lost.fail({}, 'connection closed');
    });
  }

  /** For /readyz: the serving client's state. */
  check(): { ok: boolean; message?: string } {
    return this.fast.status === 'ready' ? { ok: true } : { ok: false, message: `redis is ${this.fast.status}; serving by fallback` };
  }

  close(): void {
    this.closed = true;
    this.fast.disconnect();
    this.patient.disconnect();
  }
}
