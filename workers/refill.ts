// The refill role alone: BullMQ worker + sweep scheduler filling Redis (and Kafka) pools from Postgres,
// with /healthz, /readyz and /metrics on IDMINT_PORT.
import { runProcess } from '../src/app/process.js';
import { startServeProcess } from '../src/app/serve.js';

runProcess('idmint-refill', startServeProcess, { IDMINT_ROLES: 'refill' });
