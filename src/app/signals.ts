import cluster from 'node:cluster';
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';

/** How long a graceful stop may take before the process exits anyway. */
export const CLOSE_DEADLINE_MS = 10_000;

/**
 * A signal this soon after the first is the same request delivered twice: a Ctrl-C under
 * `npm start` reaches the server from the terminal and again from npm, which forwards what it got.
 */
export const REPEAT_WINDOW_MS = 1000;

/**
 * After a graceful stop under npm, how long the process waits for npm's forwarded copy of the
 * signal before it exits anyway (someone may have signalled the server alone).
 */
export const FORWARD_WAIT_MS = 2000;

/**
 * Whether this process was started by npm (`npm start` runs `sh -c '... exec node ...'`, so npm is
 * the parent). `npm_lifecycle_event` alone is not enough: every process a `npm test` run spawns
 * inherits it, and none of them gets a forwarded signal.
 */
export function startedByNpm(env: NodeJS.ProcessEnv = process.env, ppid: number = process.ppid): boolean {
  if (env.npm_lifecycle_event === undefined) return false;
  try {
    return isNpmCommandLine(readFileSync(`/proc/${ppid}/cmdline`, 'latin1'));
  } catch {
    return true; // no /proc (not Linux): trust the variable
  }
}

/** A /proc cmdline of npm: `npm start` (npm sets its title) or `node /usr/bin/npm start`. */
export function isNpmCommandLine(cmdline: string): boolean {
  return /(^|[/\0])npm(-cli\.js)?([\0 ]|$)/.test(cmdline);
}

/**
 * Stops the process gracefully on SIGINT/SIGTERM within CLOSE_DEADLINE_MS; another signal more
 * than REPEAT_WINDOW_MS after the first exits at once (a second Ctrl-C means "now").
 *
 * Under npm the terminal's Ctrl-C reaches the server twice: from the terminal and forwarded by
 * npm, whenever npm gets to it. So the first repeat is npm's forward however late it comes (a
 * user's second Ctrl-C is the third signal), and a stopped server waits for that forward (at most
 * FORWARD_WAIT_MS) before it exits: a forward arriving while the process exits finds the signal's
 * default action back in place, kills the process, and npm reports the signal (exit 130) for a
 * server that had stopped cleanly.
 */
export function stopOnSignals(logger: Logger, close: () => Promise<void>, now: () => number = Date.now, underNpm: boolean = startedByNpm()): void {
  let stoppingSince: number | undefined;
  let forwardsExpected = underNpm ? 1 : 0;
  let forwarded: () => void = () => undefined;
  const forwardArrived = new Promise<void>((resolve) => (forwarded = resolve));
  if (forwardsExpected === 0) forwarded();
  const exitWhenForwarded = (code: number): void => {
    const wait = setTimeout(forwarded, FORWARD_WAIT_MS);
    void forwardArrived.then(() => {
      clearTimeout(wait);
      logger.flush(() => process.exit(code));
    });
  };
  const stop = (signal: NodeJS.Signals): void => {
    if (stoppingSince !== undefined) {
      if (forwardsExpected > 0 || now() - stoppingSince < REPEAT_WINDOW_MS) {
        if (forwardsExpected > 0 && --forwardsExpected === 0) forwarded();
        logger.debug({ signal }, "the same stop request again (npm forwards the terminal's signal); still stopping gracefully");
        return;
      }
      logger.warn({ signal }, 'second signal: exiting immediately');
      process.exit(130);
    }
    stoppingSince = now();
    logger.info({ signal }, 'shutting down');
    const deadline = setTimeout(() => {
      logger.error(`shutdown took over ${CLOSE_DEADLINE_MS} ms; exiting`);
      process.exit(1);
    }, CLOSE_DEADLINE_MS);
    deadline.unref();
    close().then(
      () => {
        logger.info('stopped cleanly');
        // Exit explicitly: a client library's lingering timer must not keep a stopped server alive.
        exitWhenForwarded(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', stop);
  // A process of an IDMINT_PROCESSES group is stopped by its primary (SIGTERM); Ctrl-C reaches
  // the whole terminal group, and counting it would make the primary's SIGTERM a second signal.
  process.on('SIGINT', cluster.isWorker ? () => undefined : stop);
}
