import pino, { type Logger, type LoggerOptions } from 'pino';

export type { Logger };

/**
 * The one pino logger. Pretty output only on a TTY; JSON everywhere else, written synchronously. Components take
 * `logger.child({ component })` from whatever logger their caller injects.
 */
export function createLogger(options: { level?: string; name?: string; destination?: pino.DestinationStream } = {}): Logger {
  const base: LoggerOptions = { name: options.name ?? 'idmint', level: options.level ?? 'info' };
  if (options.destination) return pino(base, options.destination);
  if (process.stdout.isTTY) {
    return pino({ ...base, transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l' } } });
  }
  // Synchronous writes to stdout: pino's default stream writes asynchronously, and a process that
  // exits right after its last lines (a stop) wrote those synchronously at exit while an earlier
  // line was still in flight, so lines came out of order (a CI run saw "started" after "stopped
  // cleanly") or were lost. The servers log per event, never per ID: the write costs nothing here.
  return pino(base, pino.destination({ dest: 1, sync: true }));
}
