import type { Logger } from '../../core/logger.js';
import { buildSnowflakeServer } from '../../http/snowflake-server.js';
import { Closers } from '../closers.js';
import { connectionLimits, type Config } from '../config.js';
import { listen } from '../listen.js';
import type { Started } from '../process.js';
import { createSnowflakeSourceFromConfig } from '../worker-id.js';

/**
 * Leaf's Snowflake-only server (workers/snowflake.ts): a worker id from ZooKeeper (or the file,
 * or a static id) and the Leaf Snowflake routes, with the API server's gate pass, per-client
 * rate limit and HEAD rule.
 */
export async function startSnowflakeProcess({ config, logger }: { config: Config; logger: Logger }): Promise<Started> {
  const closers = new Closers(logger);
  try {
    const source = await createSnowflakeSourceFromConfig(config, { logger });
    closers.add('snowflake', () => source.close());
    const app = await buildSnowflakeServer({
      source,
      logger,
      limits: connectionLimits(config),
      rateLimits: { perClient: config.IDMINT_RATE_LIMIT_CLIENT, perTag: 0, windowMs: config.IDMINT_RATE_LIMIT_WINDOW_MS },
      ...(config.IDMINT_GATE_PASS ? { gatePass: config.IDMINT_GATE_PASS } : {}),
      ...(config.IDMINT_METRICS_TOKEN ? { metricsToken: config.IDMINT_METRICS_TOKEN } : {}),
    });
    closers.add('http', () => app.close());
    const url = await listen(app, config.IDMINT_HOST, config.IDMINT_PORT);
    logger.info({ url, workerId: source.workerId }, `snowflake server at ${url}; try: curl ${url}/api/snowflake/get/any`);
    return { close: () => closers.closeAll() };
  } catch (err) {
    await closers.closeAll();
    throw err;
  }
}
