// Leaf's snowflake-only server: a ZooKeeper (or file/static) worker id and the Snowflake routes.
import { runEntryPoint } from '../src/cli/entry.js';
import { loadConfig } from '../src/config.js';
import { stopOnSignals } from '../src/cli/serve.js';
import { buildSnowflakeServer } from '../src/http/snowflake-server.js';
import { createLogger } from '../src/log.js';
import { createSnowflakeSourceFromConfig } from '../src/snowflake-source.js';

runEntryPoint('idmint-snowflake', async () => {
  const config = loadConfig();
  const logger = createLogger({ level: config.LOG_LEVEL, name: 'idmint-snowflake' });
  const source = await createSnowflakeSourceFromConfig(config, { logger });
  const app = await buildSnowflakeServer({ source, logger });
  const url = await app.listen({ host: config.IDMINT_HOST, port: config.IDMINT_PORT });
  logger.info({ url, workerId: source.workerId }, `snowflake server at ${url}; try: curl ${url}/api/snowflake/get/any`);
  stopOnSignals(logger, async () => {
    await app.close();
    await source.close();
  });
});
