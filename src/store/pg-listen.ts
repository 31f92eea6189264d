import pg from 'pg';
import { silentLogger, type Logger } from '../core/logger.js';
import { Episode } from '../core/episode.js';
import { retry, sleep } from '../core/retry.js';
import type { ChangeListener } from './db.js';

export interface PgListenOptions {
  /** One single-host URL per host (src/store/pg-hosts.ts); the writable one is listened on. */
  urls: readonly string[];
  channel: string;
  listener: ChangeListener;
  /** Pause before connecting again after the connection is lost. Default 500 ms. */
  retryMs?: number;
  logger?: Logger;
}

/**
 * A dedicated connection doing LISTEN on the writable primary (a NOTIFY is delivered only on the
 * server where its transaction committed), connected again whenever it is lost. The listener
 * hears `connected(false)` when it is lost and `connected(true)` once it listens again: what was
 * notified meanwhile is missed, so caches fall back on their bound.
 */
export function pgListen(options: PgListenOptions): () => Promise<void> {
  const log = (options.logger ?? silentLogger).child({ component: 'change-feed' });
  const retryMs = options.retryMs ?? 500;
  const lost = new Episode(log, 'the change feed (LISTEN) is disconnected; caches rely on their 1 s bound', { dependency: 'postgres' });
  let client: pg.Client | undefined;
  const stop = new AbortController();

  /** Listens on the first writable host, or throws every host's reason. */
  const connectOnce = async (): Promise<void> => {
    const reasons: string[] = [];
    for (const url of options.urls) {
      if (stop.signal.aborted) return;
      const c = new pg.Client({ connectionString: url, keepAlive: true, connectionTimeoutMillis: 5000 });
      c.on('error', (err) => dropped(c, err.message));
      c.on('end', () => dropped(c, 'connection ended'));
      try {
        await c.connect();
        const { rows } = await c.query<{ standby: boolean }>('SELECT pg_is_in_recovery() AS standby');
        if (rows[0]?.standby) throw new Error('a standby');
        c.on('notification', (n) => {
          if (n.channel === options.channel && n.payload !== undefined) options.listener.notify(n.payload);
        });
        await c.query(`LISTEN ${options.channel}`);
        if (stop.signal.aborted) {
          await c.end().catch(() => undefined);
          return;
        }
        client = c;
        lost.recover();
        options.listener.connected(true);
        return;
      } catch (err) {
        c.removeAllListeners('end');
        await c.end().catch(() => undefined);
        reasons.push(`${new URL(url).host}: ${(err as Error).message}`);
      }
    }
    throw new Error(reasons.join('; '));
  };

  /** Connects, again every retryMs until it listens or the feed stops; `pause` first after a loss. */
  const connect = async (pause: boolean): Promise<void> => {
    if (pause) await sleep(retryMs, { signal: stop.signal, unref: true });
    await retry(connectOnce, {
      what: 'the change feed (LISTEN)',
      retriable: () => !stop.signal.aborted,
      initialMs: retryMs,
      factor: 1,
      maxMs: retryMs,
      signal: stop.signal,
      unref: true,
      onRetry: ({ err }) => lost.fail({}, (err as Error).message),
    });
  };

  const dropped = (c: pg.Client, reason: string): void => {
    if (client !== c) return;
    client = undefined;
    c.end().catch(() => undefined);
    if (stop.signal.aborted) return;
    lost.fail({}, reason);
    options.listener.connected(false);
    void connect(true).catch(() => undefined);
  };

  void connect(false).catch(() => undefined);
  return async () => {
    stop.abort();
    const c = client;
    client = undefined;
    await c?.end().catch(() => undefined);
  };
}
