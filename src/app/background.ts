import { Episode } from '../core/episode.js';
import type { Logger } from '../core/logger.js';
import { retry } from '../core/retry.js';

export interface Background<T> {
  /** What started, once it has. */
  readonly started: T | undefined;
  /** `running` once started; `starting` while attempts go on. */
  state(): 'running' | 'starting';
  /** Stops retrying and closes what started (an attempt still in flight closes what it opens). */
  close(): Promise<void>;
}

export interface BackgroundOptions<T> {
  logger: Logger;
  /** Pause between failed attempts. Default 5000 ms. */
  retryMs?: number;
  onStarted?(started: T): void;
}

/**
 * Starts a role that waits on a server (the refill worker on Redis, the responder on Kafka's
 * group) without holding up the process: attempts repeat every `retryMs` until one succeeds or
 * the process stops. Failures are one episode in the log (one warn line, a reminder a minute,
 * one line when it starts), not a line per attempt.
 */
export function startInBackground<T extends { close(): Promise<void> }>(what: string, start: () => Promise<T>, options: BackgroundOptions<T>): Background<T> {
  const retryMs = options.retryMs ?? 5000;
  const failing = new Episode(options.logger, `${what} could not start; retrying every ${retryMs} ms`);
  let started: T | undefined;
  const stop = new AbortController();
  const attempts = retry(
    async () => {
      const value = await start();
      if (stop.signal.aborted) return void (await value.close());
      started = value;
      failing.recover();
      options.onStarted?.(value);
    },
    {
      what: `starting ${what}`,
      retriable: () => !stop.signal.aborted,
      initialMs: retryMs,
      factor: 1,
      maxMs: retryMs,
      signal: stop.signal,
      unref: true,
      onRetry: ({ err }) => failing.fail({}, err instanceof Error ? err.message : String(err)),
    },
  ).catch(() => undefined);
  return {
    get started() {
      return started;
    },
    state: () => (started ? 'running' : 'starting'),
    close: async () => {
      stop.abort();
      await attempts;
      await started?.close();
    },
  };
}
