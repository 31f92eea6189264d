import { z } from 'zod';
import { Registry } from 'prom-client';
import type { Config } from '../config.js';
import { IdmintError } from '../core/errors.js';
import type { IdDispenser } from '../core/types.js';
import { Dispenser } from '../dispenser.js';
import type { Logger } from '../log.js';
import { MemoryPool } from '../pool/memory.js';
import { DirectSegmentSource } from '../segment-source.js';
import { PostgresBizStore } from '../store/biz-store.js';
import { migrate } from '../store/migrations.js';
import { createPgDatabase } from '../store/pg.js';
import { createKafka } from './kafka.js';
import { createResponder } from './responder.js';
import type { Responder } from './responder.js';
import { REQUEST_TOPIC, RESPONDER_GROUP } from './topics.js';

/**
 * The responder role: a responder wired from the environment. Given a dispenser (from the
 * runtime of `idmint serve`) it serves from that; alone (workers/responder.ts) it builds one
 * over Postgres with in-memory double buffers and direct-segment fallback.
 */

const name = z.string().trim().regex(/^[A-Za-z0-9._-]{1,249}$/, 'letters, digits, . _ -');

export const responderEnvSchema = z.object({
  /** Request topic. Default `idmint.requests`. */
  IDMINT_KAFKA_REQUEST_TOPIC: name.default(REQUEST_TOPIC),
  /** Responder consumer group. Default `idmint.responders`. */
  IDMINT_KAFKA_RESPONDER_GROUP: name.default(RESPONDER_GROUP),
  /** Responder group session timeout, ms: how soon a crashed responder's partitions move. Default 30000 (broker minimum 6000). */
  IDMINT_KAFKA_SESSION_TIMEOUT_MS: z.coerce.number().int().min(1000).max(3_600_000).default(30_000),
  /** Postgres schema of idmint's tables for a standalone responder. Default: the server's search_path. */
  IDMINT_PG_SCHEMA: z.string().trim().regex(/^[a-z_][a-z0-9_]{0,62}$/, 'a lower-case SQL identifier').optional(),
});
export type ResponderEnv = Readonly<z.infer<typeof responderEnvSchema>>;

export function loadResponderEnv(env: NodeJS.ProcessEnv = process.env): ResponderEnv {
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = responderEnvSchema.safeParse(cleaned);
  if (!parsed.success) {
    throw new IdmintError('BAD_REQUEST', `invalid configuration: ${parsed.error.issues.map((i) => `${i.path.join('.')}: expected ${i.message}`).join('; ')}`);
  }
  return Object.freeze(parsed.data);
}

export interface ResponderRoleOptions {
  config: Config;
  env?: ResponderEnv;
  logger: Logger;
  dispenser?: IdDispenser;
  registry?: Registry;
}

export interface ResponderRole {
  readonly responder: Responder;
  readonly registry: Registry;
  close(): Promise<void>;
}

export async function startResponderRole(options: ResponderRoleOptions): Promise<ResponderRole> {
  const { config, logger } = options;
  const env = options.env ?? loadResponderEnv();
  if (!config.KAFKA_BROKERS) throw new IdmintError('BAD_REQUEST', 'the responder needs KAFKA_BROKERS (host:port[,host:port])');
  const closers: Array<() => Promise<void>> = [];
  const closeAll = async (): Promise<void> => {
    for (const close of closers.splice(0).reverse()) await close().catch((err: unknown) => logger.error({ err }, 'responder role: close failed'));
  };
  try {
    let dispenser = options.dispenser;
    if (!dispenser) {
      if (!config.DATABASE_URL) throw new IdmintError('BAD_REQUEST', 'a standalone responder needs DATABASE_URL (segments come from Postgres)');
      const db = createPgDatabase({ connectionString: config.DATABASE_URL, schema: env.IDMINT_PG_SCHEMA, logger });
      closers.push(() => db.close());
      await migrate(db, logger);
      const store = new PostgresBizStore(db, { logger });
      const memory = new MemoryPool({ allocator: store, logger });
      closers.push(() => memory.close());
      dispenser = new Dispenser({ store, pools: { memory }, segment: new DirectSegmentSource(store), maxCount: config.IDMINT_MAX_COUNT, logger });
    }
    const registry = options.registry ?? new Registry();
    const kafka = createKafka({ brokers: config.KAFKA_BROKERS, clientId: 'idmint-responder', logger });
    const responder = createResponder({
      kafka,
      dispenser,
      groupId: env.IDMINT_KAFKA_RESPONDER_GROUP,
      requestTopic: env.IDMINT_KAFKA_REQUEST_TOPIC,
      maxCount: config.IDMINT_MAX_COUNT,
      sessionTimeoutMs: env.IDMINT_KAFKA_SESSION_TIMEOUT_MS,
      logger,
      registry,
    });
    closers.push(() => responder.close());
    await responder.start();
    let closing: Promise<void> | undefined;
    return { responder, registry, close: () => (closing ??= closeAll()) };
  } catch (err) {
    await closeAll();
    throw err;
  }
}
