import { isIdmintError } from '../core/errors.js';

/** Runs a process entry point; a failure to start is one line (a stack only for real faults) and exit 1. */
export function runEntryPoint(name: string, start: () => Promise<void>): void {
  start().catch((err: unknown) => {
    const line = isIdmintError(err) ? `${err.code}: ${err.message}` : err instanceof Error ? (err.stack ?? err.message) : String(err);
    process.stderr.write(`${name}: ${line}\n`);
    process.exit(1);
  });
}
