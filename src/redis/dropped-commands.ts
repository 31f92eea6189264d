import type { Redis } from 'ioredis';
import { isCluster } from './cluster.js';

/** What a command in flight when its connection dropped is rejected with. */
export const DROPPED_MESSAGE = 'Redis connection lost while the command was in flight; it may or may not have run';

interface Stash {
  length: number;
  shift(): { command: { reject(err: Error): void } } | undefined;
}

const settled = new WeakSet<Redis>();

/**
 * ioredis with `autoResendUnfulfilledCommands: false` never settles a command that was in flight
 * when the connection dropped (redis/ioredis#2193; fixed after 6.0.0, in no release yet): it
 * stashes it on close and throws the stash away on reconnect. A refill's push, or the BullMQ
 * worker's blocking read, then waited forever after a Redis restart, holding the worker's slots:
 * pools were never refilled again. This rejects the stash as the client starts to reconnect,
 * which is what the option promises (the command may have run: its caller treats it as failed).
 * Clients made by `duplicate()` (BullMQ's blocking connection) get the same. Idempotent.
 */
export function settleDroppedCommands(redis: Redis): Redis {
  if (settled.has(redis)) return redis;
  settled.add(redis);
  redis.on('reconnecting', () => {
    const stash = (redis as unknown as { prevCommandQueue?: Stash | null }).prevCommandQueue;
    if (!stash) return;
    const error = new Error(DROPPED_MESSAGE);
    for (let item = stash.shift(); item; item = stash.shift()) item.command.reject(error);
  });
  // A Cluster client has a connection per node, each with its own stash.
  if (isCluster(redis)) redis.on('+node', (node: Redis) => settleDroppedCommands(node));
  const duplicate = redis.duplicate.bind(redis);
  redis.duplicate = (...args: Parameters<Redis['duplicate']>) => settleDroppedCommands(duplicate(...args));
  return redis;
}
