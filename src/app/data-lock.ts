import { linkSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { IdmintError } from '../core/errors.js';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readHolder(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/**
 * One process per data directory: the worker-id file and clock mark live there (and PGlite is
 * single-writer), so two processes sharing it could share a worker id. The lock file holds
 * `pid@host` and is created by an atomic link, so it is never seen empty. A lock of a dead
 * process on this host is taken over; one from another host (a shared volume) is refused,
 * since its process cannot be checked from here.
 */
export function lockDataDir(dataDir: string): { release(): void } {
  mkdirSync(dataDir, { recursive: true });
  const path = join(dataDir, 'idmint.lock');
  const me = `${process.pid}@${hostname()}`;
  const mine = join(dataDir, `.idmint.lock.${process.pid}.${Date.now()}`);
  writeFileSync(mine, me);
  try {
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        linkSync(mine, path);
        let released = false;
        return {
          release() {
            if (released) return;
            released = true;
            if (readHolder(path) === me) rmSync(path, { force: true });
          },
        };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const holder = readHolder(path);
      if (holder === undefined) continue; // released meanwhile
      const [pidText = '', host = ''] = holder.split('@');
      const pid = Number(pidText);
      if (host !== hostname()) {
        throw new IdmintError(
          'NOT_READY',
          `data directory ${dataDir} is locked by process ${pidText} on host ${host}; if that process is gone, delete ${path}, or set IDMINT_DATA_DIR to another directory`,
        );
      }
      if (Number.isInteger(pid) && pid !== process.pid && alive(pid)) {
        throw new IdmintError('NOT_READY', `data directory ${dataDir} is in use by process ${pid}; stop it, or set IDMINT_DATA_DIR to another directory`);
      }
      // Stale: move it aside, and make sure what moved is the stale lock, not one a racer just took.
      const aside = `${mine}.stale`;
      try {
        renameSync(path, aside);
      } catch {
        continue;
      }
      if (readHolder(aside) !== holder) {
        try {
          linkSync(aside, path);
        } catch {
          // the racer's lock is gone; it keeps running, and we refuse below
        }
        rmSync(aside, { force: true });
        throw new IdmintError('NOT_READY', `data directory ${dataDir} was just locked by another process; set IDMINT_DATA_DIR to another directory`);
      }
      rmSync(aside, { force: true });
    }
    throw new IdmintError('NOT_READY', `could not lock data directory ${dataDir}`);
  } finally {
    rmSync(mine, { force: true });
  }
}
