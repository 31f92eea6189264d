import { accessSync, constants, lstatSync, mkdirSync, realpathSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ConfigError, type IdmintError } from '../core/errors.js';

/**
 * Creates IDMINT_DATA_DIR if needed and checks it is a writable directory on a real file
 * system, so a wrong value stops the start with one line that names the variable — not a
 * stack trace, and not a hang (files under /proc and /sys are not files).
 */
export function prepareDataDir(configured: string): string {
  const dir = resolve(configured);
  const refuse = (why: string, cause?: unknown): IdmintError =>
    new ConfigError(
      `IDMINT_DATA_DIR ${configured} ${why}; point it at a writable directory (default ./data)`,
      'IDMINT_DATA_DIR',
      cause === undefined ? {} : { cause },
    );
  if (/^\/(proc|sys|dev)(\/|$)/.test(realExisting(dir))) throw refuse('is inside a kernel file system (/proc, /sys or /dev)');
  try {
    mkdirSync(dir, { recursive: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' || code === 'ENOTDIR') throw refuse('is a file, not a directory', err);
    if (code === 'ENOENT') throw refuse('is a symbolic link to a path that does not exist', err);
    if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') throw refuse('cannot be created here (no permission, or a read-only file system)', err);
    throw refuse(`cannot be created (${code ?? (err as Error).message})`, err);
  }
  try {
    accessSync(dir, constants.W_OK);
  } catch (err) {
    throw refuse('is not writable by this user', err);
  }
  return dir;
}

/** The real path of `path`, or of its nearest existing ancestor (symlinks resolved). */
function realExisting(path: string): string {
  for (let p = path; ; p = dirname(p)) {
    try {
      lstatSync(p);
      return realpathSync(p);
    } catch {
      if (p === dirname(p)) return p;
    }
  }
}
