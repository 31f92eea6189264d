// The refill role alone: BullMQ worker + sweep scheduler filling Redis (and Kafka) pools from Postgres.
import { loadConfig } from '../src/config.js';
import { IdmintError, isIdmintError } from '../src/core/errors.js';
import { createLogger } from '../src/log.js';
import { loadRefillEnv } from '../src/refill/env.js';
import { kafkaPoolSinkFromConfig } from '../src/pool/kafka-sink.js';
import { startRefillRole } from '../src/refill/role.js';
import { PostgresBizStore } from '../src/store/biz-store.js';
import { migrate } from '../src/store/migrations.js';
import { createPgDatabase } from '../src/store/pg.js';

async function main(): Promise<void> {
  const config = loadConfig();
  const refillEnv = loadRefillEnv();
  const logger = createLogger({ level: config.LOG_LEVEL, name: 'idmint-refill' });
  if (!config.DATABASE_URL) throw new IdmintError('BAD_REQUEST', 'workers/refill needs DATABASE_URL (segments come from Postgres)');
  const db = createPgDatabase({ connectionString: config.DATABASE_URL, logger });
  await migrate(db, logger);
  const store = new PostgresBizStore(db, { logger });
  // Tags with Kafka pools are refilled by publishing blocks to their pool topics.
  const kafkaSink = kafkaPoolSinkFromConfig(config, { logger });
  const role = await startRefillRole({ config, refillEnv, store, logger, ...(kafkaSink ? { extraSinks: { kafka: kafkaSink } } : {}) });
  logger.info({ queue: refillEnv.IDMINT_REFILL_QUEUE, sweepEveryMs: config.IDMINT_REFILL_EVERY_MS }, 'refill worker ready');

  let stopping = false;
  const stop = (signal: string) => {
    // A second signal means "now": running jobs are left to the stall checker of another worker.
    if (stopping) process.exit(1);
    stopping = true;
    logger.info({ signal }, 'stopping refill worker');
    const deadline = setTimeout(() => process.exit(1), 10_000);
    deadline.unref();
    role
      .close()
      .then(() => kafkaSink?.close())
      .then(() => store.close())
      .then(() => db.close())
      .then(() => process.exit(0), (err: unknown) => {
        logger.error({ err }, 'refill worker did not stop cleanly');
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((err: unknown) => {
  process.stderr.write(`idmint-refill: ${isIdmintError(err) ? `${err.code}: ${err.message}` : err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
