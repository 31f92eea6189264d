import cluster from 'node:cluster';
import type { Logger } from 'pino';

/** How long a graceful stop may take before the process exits anyway. */
export const CLOSE_DEADLINE_MS = 10_000;

/**
 * Stops the process gracefully on SIGINT/SIGTERM within CLOSE_DEADLINE_MS; a second signal
 * exits at once.
 */
export function stopOnSignals(logger: Logger, close: () => Promise<void>): void {
  let stopping = false;
  const stop = (signal: NodeJS.Signals): void => {
    // A second signal means "now": skip the graceful path.
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting immediately');
      process.exit(130);
    }
    stopping = true;
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
        logger.flush(() => process.exit(0));
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
