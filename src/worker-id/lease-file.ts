import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeJsonDurablySync } from './local-time-mark.js';

/**
 * What a reclaiming provider keeps in its data directory: the token of the process now using it
 * (and of its predecessors whose leases may still be live), and the id it holds. Only one process
 * uses a data directory at a time (src/app/data-lock.ts), so a live lease that carries one of
 * these tokens belongs to a process that is gone: its successor may take the lease over at once
 * instead of waiting for it to expire. (The id itself is in the clock mark's file, written when it
 * was taken: one durable write per start fewer.)
 */
export interface LeaseFileState {
  readonly version: 1;
  /** The token of the process that wrote the file. */
  readonly token: string;
  /** Earlier processes of this directory whose leases may still be live (a start that ended before it took one). */
  readonly predecessors: readonly string[];
  /** `zookeeper`, `postgres`, `redis`. */
  readonly registry: string;
  readonly updatedAt: string;
}

/** The file for `key` under `dataDir`, beside the clock mark of the same key. */
export function leaseFilePath(dataDir: string, key: string): string {
  return join(dataDir, `worker-lease.${key.replace(/[^A-Za-z0-9._-]/g, '_')}.json`);
}

/**
 * The state, or null when there is none. A file that cannot be read or parsed is treated as
 * absent: it only ever shortens a wait (a predecessor's lease is then waited out), never an ID's floor.
 */
export function readLeaseFile(path: string): LeaseFileState | null {
  try {
    const s = JSON.parse(readFileSync(path, 'utf8')) as Partial<LeaseFileState>;
    if (s.version !== 1 || typeof s.token !== 'string' || !Array.isArray(s.predecessors)) return null;
    return s as LeaseFileState;
  } catch {
    return null;
  }
}

/** Durable: the token must be on disk before a lease carrying it exists. */
export function writeLeaseFile(path: string, state: Omit<LeaseFileState, 'version' | 'updatedAt'>): void {
  writeJsonDurablySync(path, { version: 1, ...state, updatedAt: new Date().toISOString() } satisfies LeaseFileState);
}
