import pg from 'pg';
import { silentLogger, type Logger } from '../core/logger.js';
import { Episode } from '../core/episode.js';
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
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;

  const schedule = (): void => {
    if (stopped || timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      void connect();
    }, retryMs);
    timer.unref();
  };

  const dropped = (c: pg.Client, reason: string): void => {
    if (client !== c) return;
    client = undefined;
    c.end().catch(() => undefined);
    if (stopped) return;
    lost.fail({}, reason);
    options.listener.connected(false);
    schedule();
  };

  const connect = async (): Promise<void> => {
    const reasons: string[] = [];
    for (const url of options.urls) {
      if (stopped) return;
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
        if (stopped) {
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
    lost.fail({}, reasons.join('; '));
    schedule();
  };

  void connect();
  return async () => {
    stopped = true;
    if (timer) clearTimeout(timer);
    const c = client;
    client = undefined;
    await c?.end().catch(() => undefined);
  };
}
