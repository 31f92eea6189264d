import { Redis, type RedisOptions } from 'ioredis';

/**
 * A client its user may be given either way, as BullMQ's RedisConnection is: a URL opens a client
 * that is ours to close; a client passed in belongs to whoever made it and is never closed here.
 */
export interface RedisHandle {
  readonly client: Redis;
  /** Whether close() ends the client (it was opened from a URL here). */
  readonly owned: boolean;
  /** Idempotent: quits an owned client (disconnects if Redis does not answer); leaves a shared one open. */
  close(): Promise<void>;
}

export function redisHandle(connection: string | Redis, options: RedisOptions = {}): RedisHandle {
  if (typeof connection !== 'string') return { client: connection, owned: false, close: async () => undefined };
  const client = new Redis(connection, options);
  let closing: Promise<void> | undefined;
  return {
    client,
    owned: true,
    close: () =>
      (closing ??= client.quit().then(
        () => undefined,
        () => client.disconnect(),
      )),
  };
}
