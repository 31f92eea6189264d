import { SpanKind, SpanStatusCode, context, trace, type Span } from '@opentelemetry/api';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { extractTraceContext } from './propagation.js';
import { idmintTracer, tracingOn } from './tracer.js';

const SPAN = Symbol('idmint.span');

/** Probes and scrapes, every few seconds from every orchestrator and Prometheus: not worth a trace each. */
export const UNTRACED_ROUTES: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics']);
type Traced = FastifyRequest & { [SPAN]?: Span };

/**
 * A SERVER span per request (HTTP semantic conventions: `GET /v1/ids/:bizTag`, `http.route`,
 * `http.response.status_code`...), child of the caller's `traceparent`, active while the route
 * runs so the dispenser's spans hang under it. Installed only when a tracer provider is
 * registered as the server is built: with tracing off the server has no extra hook at all.
 */
export function traceHttp(app: FastifyInstance): void {
  if (!tracingOn()) return;
  const tracer = idmintTracer();
  // Callback hooks: the rest of the request (later hooks, the handler) runs inside context.with.
  app.addHook('onRequest', (request, _reply, done) => {
    const route = request.routeOptions.url;
    if (route !== undefined && UNTRACED_ROUTES.has(route)) return done();
    const path = request.url;
    const query = path.indexOf('?');
    const span = tracer.startSpan(
      route ? `${request.method} ${route}` : request.method,
      {
        kind: SpanKind.SERVER,
        attributes: {
          'http.request.method': request.method,
          'url.path': query < 0 ? path : path.slice(0, query),
          'url.scheme': request.protocol,
          ...(route ? { 'http.route': route } : {}),
          'server.address': request.hostname,
          'client.address': request.ip,
          'network.protocol.version': request.raw.httpVersion,
          ...(request.headers['user-agent'] ? { 'user_agent.original': request.headers['user-agent'] } : {}),
        },
      },
      extractTraceContext(request.headers),
    );
    (request as Traced)[SPAN] = span;
    context.with(trace.setSpan(context.active(), span), done);
  });
  app.addHook('onError', (request, _reply, error, done) => {
    const span = (request as Traced)[SPAN];
    if (span) {
      span.recordException(error);
      span.setAttribute('error.type', (error as { code?: string }).code ?? error.constructor.name);
    }
    done();
  });
  app.addHook('onResponse', (request, reply, done) => {
    end(request, reply.statusCode);
    done();
  });
  // A client gone before the answer: the span still ends (no status code to record).
  app.addHook('onRequestAbort', (request, done) => {
    end(request, undefined);
    done();
  });
}

function end(request: FastifyRequest, status: number | undefined): void {
  const span = (request as Traced)[SPAN];
  if (!span) return;
  (request as Traced)[SPAN] = undefined;
  if (status !== undefined) {
    span.setAttribute('http.response.status_code', status);
    // Server spans: only 5xx are errors (a 4xx is the caller's).
    if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  } else {
    span.setAttribute('error.type', 'aborted');
  }
  span.end();
}
