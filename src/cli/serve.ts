import type { Command } from 'commander';

/** `idmint serve`: every role this config allows, in one process (or IDMINT_PROCESSES of them), until SIGINT or SIGTERM. */
export function registerServeCommand(program: Command): void {
  program
    .command('serve')
    .description('serve IDs over HTTP (embedded PGlite and in-memory pools unless DATABASE_URL, REDIS_URL, ... are set)')
    .option('-p, --port <port>', 'HTTP port (default $IDMINT_PORT or 8080)')
    .option('--host <host>', 'bind address (default $IDMINT_HOST or 127.0.0.1)')
    .option('--data-dir <dir>', 'embedded state directory (default $IDMINT_DATA_DIR or ./data)')
    .action(async (flags: { port?: string; host?: string; dataDir?: string }) => {
      // Loaded only when serving: the client commands must not pay for the server's modules.
      const { serve } = await import('../app/serve.js');
      await serve({
        ...(flags.port === undefined ? {} : { IDMINT_PORT: flags.port }),
        ...(flags.host === undefined ? {} : { IDMINT_HOST: flags.host }),
        ...(flags.dataDir === undefined ? {} : { IDMINT_DATA_DIR: flags.dataDir }),
      });
    });
}
