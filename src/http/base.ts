import { createServer, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify';
import type { Registry } from 'prom-client';
import { silentLogger, type Logger } from '../core/logger.js';
import { defaults, resolveOptions } from '../core/options.js';
import { makeTokenGuard } from './auth.js';
import { installErrorHandling } from './errors.js';
import { traceHttp } from '../tracing/http.js';

export interface ReadinessReport {
  /** `degraded`: serving by fallback (e.g. Redis down); `not_ready`: cannot serve. */
  status: 'ready' | 'degraded' | 'not_ready';
  /**
   * `message` goes to the log only (a raw error may name hosts or users); `hint`, where a check
   * has one, is safe to show unauthenticated callers and says what the operator must do.
   */
  checks: Record<string, { ok: boolean; message?: string; hint?: string }>;
}

/** How long a client may take and how many may connect: what keeps slow or hostile clients from pinning sockets. */
export interface ConnectionLimits {
  /** Whole request (headers and body) must arrive within this. Default 10,000 ms. */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this. Default 5,000 ms. */
  keepAliveTimeoutMs: number;
  /** Open connections at most; more are refused at accept. Default 10,000. */
  maxConnections: number;
}

export const CONNECTION_LIMIT_DEFAULTS = defaults<ConnectionLimits>({ requestTimeoutMs: 10_000, keepAliveTimeoutMs: 5_000, maxConnections: 10_000 });

/** How often node looks for requests past their timeout (its default is 30 s). */
const REQUEST_CHECK_INTERVAL_MS = 1000;

/** The fastify settings every idmint server shares: logging, error envelope, graceful close, connection limits. */
export function createFastify(options: { logger?: Logger; component: string; bodyLimit?: number; limits?: ConnectionLimits }): FastifyInstance {
  const { limits, logger, component, bodyLimit } = resolveOptions({ limits: CONNECTION_LIMIT_DEFAULTS, logger: silentLogger, bodyLimit: 64 * 1024 }, options);
  const app: FastifyInstance = Fastify({
    // Every phase of a request is bounded: a body trickled a byte at a time, or a Content-Length
    // larger than the body, is cut off at requestTimeout; idle sockets at keepAliveTimeout.
    serverFactory: (handler) => {
      const server = createServer(
        {
          requestTimeout: limits.requestTimeoutMs,
          headersTimeout: Math.min(limits.requestTimeoutMs, 60_000),
          keepAliveTimeout: limits.keepAliveTimeoutMs,
          // Node looks for expired requests on this interval (default 30 s): check every second.
          connectionsCheckingInterval: REQUEST_CHECK_INTERVAL_MS,
        },
        handler,
      );
      // A socket with no traffic at all (not even a request line) is closed too — after node's
      // check has answered an expired request with its 408 (a Content-Length larger than the body
      // went silent, and was cut without an answer, when this fired first).
      server.setTimeout(limits.requestTimeoutMs + limits.keepAliveTimeoutMs + REQUEST_CHECK_INTERVAL_MS);
      server.maxConnections = limits.maxConnections;
      return server;
    },
    loggerInstance: logger.child({ component }) as unknown as FastifyBaseLogger,
    // Per-request info logs would cost more than serving an ID; failures are logged by the error handler.
    logController: new LogController({ disableRequestLogging: true }),
    // No child logger per request (pino builds one with its bindings each time): request.log is
    // the server's logger, and the few lines logged per request carry reqId themselves.
    childLoggerFactory: (logger) => logger,
    bodyLimit,
    // Leaf keys run to 128 characters; fastify's default allows 100.
    routerOptions: { maxParamLength: 256 },
    // Router and parser errors in our envelope, not fastify's own shape.
    frameworkErrors: (error, _request, reply: FastifyReply) => {
      const message =
        error.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? 'a path segment is longer than 256 characters (a tag name has at most 64)'
          : 'the URL is malformed (a bad %-escape?)';
      void reply
        .status(error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 414 : 400)
        .type('application/json; charset=utf-8')
        .send({ error: { code: 'BAD_REQUEST', message } });
    },
    clientErrorHandler: clientError,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
  });
  installErrorHandling(app);
  traceHttp(app);
  return app;
}

const CLIENT_ERRORS: Record<string, [number, string]> = {
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'the request did not arrive in time (IDMINT_HTTP_REQUEST_TIMEOUT_MS)'],
  HPE_HEADER_OVERFLOW: [431, 'the request headers are too large'],
};

/** Errors before a request exists (bad HTTP, too slow, headers too large): answered in the envelope, then the socket closed. */
function clientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, message] = CLIENT_ERRORS[err.code ?? ''] ?? [400, 'malformed HTTP request'];
  const body = JSON.stringify({ error: { code: status === 408 ? 'TIMEOUT' : 'BAD_REQUEST', message } });
  // Like Node's own handler: answer only on a socket that has not sent a response already (a
  // keep-alive connection whose next bytes are garbage just closes).
  if (socket.writable && (socket as Socket).bytesWritten === 0) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json; charset=utf-8\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

/** What every server's ops routes take. */
export interface OpsOptions {
  registry: Pick<Registry, 'contentType' | 'metrics'>;
  readiness?: () => Promise<ReadinessReport>;
  /** When set, `/metrics` needs `Authorization: Bearer <it>`: it names every tag and its volume. */
  metricsToken?: string;
}

/** `/healthz`, `/readyz` (503 when not ready) and `/metrics`, on every server. */
export function opsRoutes(app: FastifyInstance, options: OpsOptions): void {
  app.get('/healthz', async () => ({ status: 'ok' }));
  // Checks failing at the last probe: a probe every few seconds logs a check when it starts
  // failing and when it recovers, not once per probe.
  const failing = new Set<string>();
  app.get('/readyz', async (request, reply) => {
    const report = options.readiness ? await options.readiness() : { status: 'ready' as const, checks: {} };
    // Unauthenticated: a failing check says which dependency, never its raw error (that goes to the log).
    // One line per probe that changes something, naming every check that changed.
    const began: Record<string, string | undefined> = {};
    const ended: string[] = [];
    const checks = Object.fromEntries(
      Object.entries(report.checks).map(([name, check]) => {
        if (check.ok) {
          if (failing.delete(name)) ended.push(name);
          return [name, check];
        }
        if (!failing.has(name)) {
          failing.add(name);
          began[name] = check.message;
        }
        return [name, { ok: false, message: check.hint ?? `${name} unavailable; see the server log` }];
      }),
    );
    const names = Object.keys(began);
    if (names.length > 0)
      request.log.warn({ checks: names, reasons: began, status: report.status }, `readiness check${names.length > 1 ? 's' : ''} failing: ${names.join(', ')}`);
    if (ended.length > 0)
      request.log.info({ checks: ended, status: report.status }, `readiness check${ended.length > 1 ? 's' : ''} passing again: ${ended.join(', ')}`);
    return reply.status(report.status === 'not_ready' ? 503 : 200).send({ status: report.status, checks });
  });
  const metricsGuard = makeTokenGuard(options.metricsToken, { variable: 'IDMINT_METRICS_TOKEN', what: 'metrics token' });
  app.get('/metrics', { onRequest: async (request) => metricsGuard(request) }, async (_request, reply) =>
    reply.type(options.registry.contentType).send(await options.registry.metrics()),
  );
}
