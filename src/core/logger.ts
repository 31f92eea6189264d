/**
 * The logger the core and adapters accept: a structural subset of pino's, so the core needs no
 * logging library. The process's real logger (pino, src/app/log.ts) is injected by the roles.
 */
export interface LogFn {
  (obj: unknown, msg?: string, ...args: unknown[]): void;
  (msg: string, ...args: unknown[]): void;
}

export interface Logger {
  /** The current level name, e.g. `info`. */
  level: string;
  silent: LogFn;
  fatal: LogFn;
  error: LogFn;
  warn: LogFn;
  info: LogFn;
  debug: LogFn;
  trace: LogFn;
  child(bindings: Record<string, unknown>): Logger;
  isLevelEnabled(level: string): boolean;
}

const drop: LogFn = () => {};

/** A logger that drops everything: the default for library code when none is injected. */
export const silentLogger: Logger = Object.freeze({
  level: 'silent',
  silent: drop,
  fatal: drop,
  error: drop,
  warn: drop,
  info: drop,
  debug: drop,
  trace: drop,
  child: () => silentLogger,
  isLevelEnabled: () => false,
});
