// The Kafka responder alone: answers ID requests on idmint.requests from Postgres segments.
import { runEntryPoint } from '../src/cli/entry.js';
import { stopOnSignals } from '../src/cli/serve.js';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/log.js';
import { startResponderRole } from '../src/rpc/role.js';

runEntryPoint('idmint-responder', async () => {
  const config = loadConfig();
  const logger = createLogger({ level: config.LOG_LEVEL, name: 'idmint-responder' });
  const role = await startResponderRole({ config, logger });
  logger.info('responder ready');
  stopOnSignals(logger, () => role.close());
});
