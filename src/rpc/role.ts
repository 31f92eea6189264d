import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
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
  /** Serve Prometheus metrics at http://IDMINT_HOST:<port>/metrics (and /healthz). Default: not served. */
  IDMINT_METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
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
  /** Where metrics are served when IDMINT_METRICS_PORT is set. */
  readonly metricsUrl: string | undefined;
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
    let metricsUrl: string | undefined;
    if (env.IDMINT_METRICS_PORT !== undefined) {
      const server = await serveMetrics(registry, config.IDMINT_HOST, env.IDMINT_METRICS_PORT);
      closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
      const address = server.address() as AddressInfo;
      metricsUrl = `http://${config.IDMINT_HOST}:${address.port}/metrics`;
      logger.info({ metricsUrl }, 'responder metrics served');
    }
    let closing: Promise<void> | undefined;
    return { responder, registry, metricsUrl, close: () => (closing ??= closeAll()) };
  } catch (err) {
    await closeAll();
    throw err;
  }
}

/** A standalone responder has no HTTP API; this is just enough for Prometheus and a liveness probe. */
async function serveMetrics(registry: Registry, host: string, port: number): Promise<Server> {
  const server = createServer((req, res) => {
    if (req.url === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
      return;
    }
    if (req.url !== '/metrics') {
      res.writeHead(404).end();
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      () => res.writeHead(500).end(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}
