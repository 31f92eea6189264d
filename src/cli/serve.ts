import type { Command } from 'commander';
import { loadConfig } from '../config.js';
import { createLogger, type Logger } from '../log.js';
import { startRuntime } from '../runtime.js';

/** How long a graceful stop may take before the process exits anyway. */
export const CLOSE_DEADLINE_MS = 10_000;

/** `idmint serve`: every role this config allows, in one process, until SIGINT or SIGTERM. */
export function registerServeCommand(program: Command): void {
  program
    .command('serve')
    .description('serve IDs over HTTP (embedded PGlite and in-memory pools unless DATABASE_URL, REDIS_URL, ... are set)')
    .option('-p, --port <port>', 'HTTP port (default $IDMINT_PORT or 8080)')
    .option('--host <host>', 'bind address (default $IDMINT_HOST or 127.0.0.1)')
    .option('--data-dir <dir>', 'embedded state directory (default $IDMINT_DATA_DIR or ./data)')
    .action(async (flags: { port?: string; host?: string; dataDir?: string }) => {
      await runServer({
        ...(flags.port === undefined ? {} : { IDMINT_PORT: flags.port }),
        ...(flags.host === undefined ? {} : { IDMINT_HOST: flags.host }),
        ...(flags.dataDir === undefined ? {} : { IDMINT_DATA_DIR: flags.dataDir }),
      });
    });
}

/**
 * Starts a serving process from the environment (plus overrides) and stops it gracefully on
 * SIGINT/SIGTERM within CLOSE_DEADLINE_MS; a second signal exits at once. Entry points call this.
 */
export async function runServer(overrides: Record<string, string> = {}): Promise<void> {
  const config = loadConfig({ ...process.env, ...overrides });
  const logger = createLogger({ level: config.LOG_LEVEL });
  const runtime = await startRuntime({ config, logger });
  if (runtime.roles.has('api')) {
    const firstTag = (await runtime.store.listBiz())[0]?.bizTag ?? 'demo';
    logger.info({ url: runtime.url, embedded: !config.DATABASE_URL }, `idmint is serving at ${runtime.url}`);
    const pass = config.IDMINT_GATE_PASS ? `&gatePass=${encodeURIComponent(config.IDMINT_GATE_PASS)}` : '';
    logger.info(`try: curl '${runtime.url}/v1/ids/${firstTag}?count=5${pass}'`);
  } else {
    logger.info({ roles: [...runtime.roles], url: runtime.url }, `idmint is running without the ID API; health and metrics at ${runtime.url}`);
  }
  stopOnSignals(logger, () => runtime.close());
}

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
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
