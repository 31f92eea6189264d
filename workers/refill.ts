// The refill role alone: BullMQ worker + sweep scheduler filling Redis (and Kafka) pools from Postgres.
import { runProcess } from '../src/app/process.js';
import { startRefillProcess } from '../src/app/roles/refill.js';

runProcess('idmint-refill', startRefillProcess);
