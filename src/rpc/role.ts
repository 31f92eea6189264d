import { z } from 'zod';
import { Registry } from 'prom-client';
import { parseEnv, type Config } from '../config.js';
import { IdmintError } from '../core/errors.js';
import type { IdDispenser } from '../core/types.js';
import type { Logger } from '../log.js';
import { createKafka } from './kafka.js';
import { createResponder } from './responder.js';
import type { Responder } from './responder.js';
import { REQUEST_TOPIC, RESPONDER_GROUP } from './topics.js';

/**
 * The responder role: a responder wired from the environment, serving from the dispenser of
 * the process's runtime (src/runtime.ts), so a responder alone (workers/responder.ts) has the
 * same pools and fallbacks as the API.
 */

const name = z.string().trim().regex(/^[A-Za-z0-9._-]{1,249}$/, 'letters, digits, . _ -');

export const responderEnvSchema = z.object({
  /** Request topic. Default `idmint.requests`. */
  IDMINT_KAFKA_REQUEST_TOPIC: name.default(REQUEST_TOPIC),
  /** Responder consumer group. Default `idmint.responders`. */
  IDMINT_KAFKA_RESPONDER_GROUP: name.default(RESPONDER_GROUP),
  /** Responder group session timeout, ms: how soon a crashed responder's partitions move. Default 30000 (broker minimum 6000). */
  IDMINT_KAFKA_SESSION_TIMEOUT_MS: z.coerce.number().int().min(1000).max(3_600_000).default(30_000),
});
export type ResponderEnv = Readonly<z.infer<typeof responderEnvSchema>>;

export function loadResponderEnv(env: NodeJS.ProcessEnv = process.env): ResponderEnv {
  return parseEnv(responderEnvSchema, env);
}

export interface ResponderRoleOptions {
  config: Config;
  env?: ResponderEnv;
  logger: Logger;
  dispenser: IdDispenser;
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
    const { dispenser } = options;
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
