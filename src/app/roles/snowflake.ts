import type { Logger } from '../../core/logger.js';
import { buildSnowflakeServer } from '../../http/snowflake-server.js';
import { Registry } from 'prom-client';
import { Closers } from '../closers.js';
import { connectionLimits, type Config } from '../config.js';
import { listen } from '../listen.js';
import type { Started } from '../process.js';
import { advertisedAddress, createSnowflakeSourceFromConfig } from '../worker-id.js';
import { openDatabase } from '../database.js';
import { openChangeFeed } from '../../store/change-feed.js';
import { openDeployment, type Deployment } from '../deployment.js';

/**
 * Leaf's Snowflake-only server (workers/snowflake.ts): a worker id from ZooKeeper (or the file,
 * or a static id) and the Leaf Snowflake routes, with the API server's gate pass, per-client
 * rate limit and HEAD rule. With DATABASE_URL it is one process of that deployment, held to its
 * record (the worker-id registry, the layout, the region split) like every other; without, a
 * generator on its own.
 */
export async function startSnowflakeProcess({ config, logger }: { config: Config; logger: Logger }): Promise<Started> {
  const closers = new Closers(logger);
  try {
    let deployment: Deployment | undefined;
    let db: Awaited<ReturnType<typeof openDatabase>> | undefined;
    if (config.DATABASE_URL) {
      db = await openDatabase(config, logger, closers);
      const changes = await openChangeFeed(db, { logger });
      closers.add('change feed', () => changes.close());
      deployment = await openDeployment(config, db, {
        serving: true,
        signs: false,
        roles: ['snowflake'],
        address: advertisedAddress(config),
        changes,
        registry: new Registry(),
        logger,
        closers,
      });
    } else {
      logger.warn(
        'no DATABASE_URL: this Snowflake server is checked against no deployment record; its worker ids are unique only among processes of its own registry',
      );
    }
    const watch = deployment?.watch;
    const source = await createSnowflakeSourceFromConfig(config, {
      logger,
      ...(db ? { db } : {}),
      ...(deployment?.zk ? { zk: deployment.zk } : {}),
      ...(deployment?.zkWorker ? { zkWorker: deployment.zkWorker } : {}),
      ...(watch ? { guard: () => watch.refusal('snowflake') } : {}),
    });
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
