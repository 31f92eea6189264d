// The Kafka responder alone: answers ID requests on idmint.requests with the same pools and
// fallbacks as the API (Postgres segments, Redis pools when REDIS_URL is set, Snowflake).
import { runProcess } from '../src/app/process.js';
import { startServeProcess } from '../src/app/serve.js';

runProcess('idmint-responder', startServeProcess, { IDMINT_ROLES: 'responder' });
