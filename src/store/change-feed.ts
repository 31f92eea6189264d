import { silentLogger, type Logger } from '../core/logger.js';
import type { Change, ChangeFeed, ChangeHandlers } from '../core/ports.js';
import type { Database } from './db.js';

/** The channel the triggers notify on. */
export const CHANGE_CHANNEL = 'idmint_changes';

/**
 * Every process's view of changes made anywhere in its deployment (another process, the CLI, SQL
 * by hand): Postgres triggers NOTIFY on each change to a tag, its tokens, the deployment record or
 * the region split, and this LISTENs. Notifications of other schemas (other deployments on one
 * database) are ignored.
 */
export async function openChangeFeed(db: Database, options: { logger?: Logger } = {}): Promise<ChangeFeed> {
  const log = (options.logger ?? silentLogger).child({ component: 'change-feed' });
  const { rows } = await db.query<{ schema: string }>('SELECT current_schema() AS schema');
  const schema = rows[0]?.schema;
  const subscribers = new Set<ChangeHandlers>();
  let connected = false;
  const stop = await db.listen(CHANGE_CHANNEL, {
    notify(payload) {
      let change: { schema?: unknown; table?: unknown; bizTag?: unknown };
      try {
        change = JSON.parse(payload) as typeof change;
      } catch {
        return log.debug({ payload: payload.slice(0, 200) }, 'a change notification that is not JSON; ignored');
      }
      if (change.schema !== schema || typeof change.table !== 'string') return;
      const out: Change = { table: change.table as Change['table'], ...(typeof change.bizTag === 'string' ? { bizTag: change.bizTag } : {}) };
      for (const s of subscribers) s.change(out);
    },
    connected(yes) {
      const was = connected;
      connected = yes;
      // Lost, or back after a loss: whatever changed meanwhile was not heard.
      if (was !== yes || yes) for (const s of subscribers) s.reset();
    },
  });
  return {
    subscribe(handlers) {
      subscribers.add(handlers);
      return () => subscribers.delete(handlers);
    },
    get connected() {
      return connected;
    },
    close: stop,
  };
}
