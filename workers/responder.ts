// The Kafka responder alone: answers ID requests on idmint.requests with the same pools and
// fallbacks as the API (Postgres segments, Redis pools when REDIS_URL is set, Snowflake).
import { runEntryPoint } from '../src/cli/entry.js';
import { runServer } from '../src/cli/serve.js';

runEntryPoint('idmint-responder', () => runServer({ IDMINT_ROLES: 'responder' }));
