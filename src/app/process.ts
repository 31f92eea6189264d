import type { Logger } from 'pino';
import { isIdmintError } from '../core/errors.js';
import { loadConfig, type Config } from './config.js';
import { createLogger } from './log.js';
import { CLOSE_DEADLINE_MS, stopOnSignals } from './signals.js';
import { startTracing, type TracingRuntime } from '../tracing/sdk.js';
import { packageVersion } from './version.js';

/** A started process: what its role builder opened, closed on a signal. */
export interface Started {
  close(): Promise<void>;
}

export type ProcessStart = (context: { config: Config; logger: Logger }) => Promise<Started>;

/** Names the failure of a start in one line: `CODE: message` for a user's mistake, a stack for a fault. */
export function startFailure(err: unknown): string {
  return isIdmintError(err) ? `${err.code}: ${err.message}` : err instanceof Error ? (err.stack ?? err.message) : String(err);
}

/**
 * Every process entry point (workers/*.ts) in one shape: config from the environment (plus
 * `overrides`), one logger, the role's builder, graceful stop on SIGINT/SIGTERM. A failure to
 * start is one line on stderr prefixed with `name`, and exit 1.
 */
export function runProcess(name: string, start: ProcessStart, overrides: Record<string, string> = {}): void {
  (async () => {
    const config = loadConfig({ ...process.env, ...overrides });
    const logger = createLogger({ level: config.LOG_LEVEL, name });
    // The handlers go in before the start: a server answers /readyz before its start has finished
    // (the first tag is looked up, the roles log their lines), and a Ctrl-C in that window found
    // SIGINT's default action (killed, exit 130). Before the start is even called: its first
    // synchronous lines may already say "listening" (a CI run caught a signal sent between that
    // line and the handlers). A signal during the start stops the process once it has started; it
    // is handled on the event loop, after `run.starting` is set below.
    // A signal during a start that never finishes (a server it waits for never answers) still
    // stops the process: stopOnSignals exits at CLOSE_DEADLINE_MS whatever the close awaits.
    const run: { starting?: Promise<Started>; started?: boolean; tracing?: Promise<TracingRuntime | undefined> } = {};
    stopOnSignals(logger, async () => {
      if (!run.started)
        logger.warn({ deadlineMs: CLOSE_DEADLINE_MS }, 'stop asked for during the start: stopping once the start has finished, or at the deadline');
      await (await run.starting!).close();
      // Last: the spans of the close itself are flushed too.
      await (await run.tracing)?.close();
    });
    // Before the role builds its servers: they install their tracing hooks only when a provider is registered.
    run.tracing = startTracing({ ...process.env, ...overrides, IDMINT_OTEL: config.IDMINT_OTEL }, logger, packageVersion());
    run.starting = run.tracing.then(() => start({ config, logger }));
    await run.starting;
    run.started = true;
  })().catch((err: unknown) => {
    process.stderr.write(`${name}: ${startFailure(err)}\n`);
    process.exit(1);
  });
}
