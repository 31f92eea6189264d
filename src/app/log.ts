import pino, { type Logger, type LoggerOptions } from 'pino';

export type { Logger };

/**
 * The one pino logger. Pretty output only on a TTY; JSON everywhere else. Components take
 * `logger.child({ component })` from whatever logger their caller injects.
 */
export function createLogger(options: { level?: string; name?: string; destination?: pino.DestinationStream } = {}): Logger {
  const base: LoggerOptions = { name: options.name ?? 'idmint', level: options.level ?? 'info' };
  if (options.destination) return pino(base, options.destination);
  if (process.stdout.isTTY) {
    return pino({ ...base, transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l' } } });
  }
  return pino(base);
}
