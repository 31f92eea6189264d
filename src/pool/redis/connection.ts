import type { ConnectionOptions } from 'node:tls';
import { Redis } from 'ioredis';
import { Episode } from '../../core/episode.js';
import { silentLogger, type Logger } from '../../core/logger.js';
import { defineScripts } from './scripts.js';

export interface RedisConnectionOptions {
  url: string;
  /** TLS settings for a `rediss://` URL (a private CA). */
  tls?: ConnectionOptions;
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
 * BullMQ's worker opens its own blocking connection from `patient`'s options.
 */
export class RedisConnection {
  readonly fast: Redis;
  readonly patient: Redis;
  private readonly log: Logger;
  private closed = false;

  constructor(options: RedisConnectionOptions) {
    this.log = (options.logger ?? silentLogger).child({ component: 'redis' });
    const tls = options.tls ? { tls: options.tls } : {};
    this.fast = new Redis(options.url, {
      ...tls,
      maxRetriesPerRequest: 1,
      autoResendUnfulfilledCommands: false,
      commandTimeout: 1000,
      connectTimeout: 2000,
      retryStrategy: (times) => Math.min(times * 200, 2000),
    });
    this.patient = new Redis(options.url, { ...tls, maxRetriesPerRequest: null, autoResendUnfulfilledCommands: false });
    defineScripts(this.fast);
    defineScripts(this.patient);
    // ioredis emits 'error' on every failed reconnect; without a listener node would crash.
    for (const client of [this.fast, this.patient]) client.on('error', (err: Error) => this.log.debug({ err: err.message }, 'redis connection error'));
    // Every failed reconnect closes the socket again: one episode, not a line per attempt.
    const lost = new Episode(this.log, "redis connection lost; serving by each tag's fallback");
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
