// The HTTP API alone (scale it out; run refills and the Kafka responder elsewhere).
import { runEntryPoint } from '../src/cli/entry.js';
import { runServer } from '../src/cli/serve.js';

runEntryPoint('idmint-api', () => runServer({ IDMINT_ROLES: 'api' }));
