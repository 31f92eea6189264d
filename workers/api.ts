// The HTTP API alone (scale it out; run refills and the Kafka responder elsewhere).
import { runProcess } from '../src/app/process.js';
import { startServeProcess } from '../src/app/serve.js';

runProcess('idmint-api', startServeProcess, { IDMINT_ROLES: 'api' });
