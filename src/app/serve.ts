import cluster from 'node:cluster';
import type { Logger } from '../core/logger.js';
import { loadConfig, type Config } from './config.js';
import { createLogger } from './log.js';
import { runProcess, startFailure, type Started } from './process.js';
import { startRuntime } from './runtime.js';

/**
 * `idmint serve`: one serving process, or with IDMINT_PROCESSES > 1 a primary that forks that
 * many on the one port (each then runs this again as a cluster worker and serves).
 */
export async function serve(overrides: Record<string, string>): Promise<void> {
  if (cluster.isPrimary) {
    let config: Config;
    try {
      config = loadConfig({ ...process.env, ...overrides });
    } catch (err) {
      process.stderr.write(`idmint: ${startFailure(err)}\n`);
      process.exit(1);
    }
    if (config.IDMINT_PROCESSES > 1) {
      const { runPrimary } = await import('./cluster/primary.js');
      runPrimary(config, createLogger({ level: config.LOG_LEVEL, name: 'idmint' }));
      return;
    }
  }
  runProcess('idmint', startServeProcess, overrides);
}

/** `idmint serve` and workers/{all,api,responder}.ts: a serving process, announced with a first command to try. */
export async function startServeProcess({ config, logger }: { config: Config; logger: Logger }): Promise<Started> {
  const runtime = await startRuntime({ config, logger });
  if (runtime.roles.has('api')) {
    const firstTag = (await runtime.store.listBiz())[0]?.bizTag;
    logger.info({ url: runtime.url, embedded: !config.DATABASE_URL }, `idmint is serving at ${runtime.url}`);
    // The gate pass is a secret: the hint names where it goes, never its value.
    const pass = config.IDMINT_GATE_PASS ? '&gatePass=<IDMINT_GATE_PASS>' : '';
    const hint = firstTag
      ? `try: curl '${runtime.url}/v1/ids/${firstTag}?count=5${pass}'`
      : `no tags yet: create one with \`npx idmint biz create <bizTag>\`, then try: curl '${runtime.url}/v1/ids/<bizTag>?count=5${pass}'`;
    logger.info(hint);
  } else {
    logger.info({ roles: [...runtime.roles], url: runtime.url }, `idmint is running without the ID API; health and metrics at ${runtime.url}`);
  }
  return runtime;
}
