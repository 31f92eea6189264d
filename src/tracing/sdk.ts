import type { SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type * as TraceNode from '@opentelemetry/sdk-trace-node';
import type * as Resources from '@opentelemetry/resources';
import type { Logger } from '../core/logger.js';
import { loadBullTelemetry } from './bullmq.js';

/** A started SDK: `close()` flushes what is buffered and unregisters it (idempotent). */
export interface TracingRuntime {
  close(): Promise<void>;
}

/** The exporters `OTEL_TRACES_EXPORTER` may name here (a comma list; `none` exports nothing). */
export const TRACE_EXPORTERS = ['otlp', 'console', 'none'] as const;

/**
 * Starts the OpenTelemetry Node SDK when `IDMINT_OTEL=1`, configured by the standard variables:
 * `OTEL_TRACES_EXPORTER` (default `otlp`), `OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (OTLP over HTTP, default http://localhost:4318),
 * `OTEL_SERVICE_NAME` (default `idmint`), `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`.
 * Without it nothing is imported: the SDK packages are optional dependencies, loaded here only.
 * An application that registered its own SDK leaves IDMINT_OTEL unset; idmint's spans go to it.
 */
export async function startTracing(env: Record<string, string | undefined>, logger: Logger, version: string): Promise<TracingRuntime | undefined> {
  if (env.IDMINT_OTEL !== '1') return undefined;
  const names = (env.OTEL_TRACES_EXPORTER ?? 'otlp')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const unknown = names.filter((n) => !(TRACE_EXPORTERS as readonly string[]).includes(n));
  if (unknown.length > 0) throw new Error(`OTEL_TRACES_EXPORTER names ${unknown.join(', ')}; idmint knows ${TRACE_EXPORTERS.join(', ')}`);
  let node: typeof TraceNode;
  let resources: typeof Resources;
  try {
    [node, resources] = await Promise.all([import('@opentelemetry/sdk-trace-node'), import('@opentelemetry/resources')]);
  } catch (err) {
    throw new Error(
      `IDMINT_OTEL=1 needs the optional dependencies @opentelemetry/sdk-trace-node and @opentelemetry/resources (installed unless --omit=optional): ${(err as Error).message}`,
    );
  }
  const processors: SpanProcessor[] = [];
  for (const name of new Set(names)) {
    // Console spans print as they end (a person is reading); OTLP goes out in batches.
    if (name === 'console') processors.push(new node.SimpleSpanProcessor(new node.ConsoleSpanExporter()));
    if (name === 'otlp') processors.push(new node.BatchSpanProcessor(await otlpExporter()));
  }
  const resource = resources
    .defaultResource()
    .merge(resources.resourceFromAttributes({ 'service.name': 'idmint', 'service.version': version }))
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over the defaults above.
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new node.NodeTracerProvider({ resource, spanProcessors: processors });
  // Registers the AsyncLocalStorage context manager and the W3C trace-context and baggage propagators.
  provider.register();
  await loadBullTelemetry();
  logger.info(
    { exporters: names, endpoint: env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT },
    'OpenTelemetry tracing on (IDMINT_OTEL=1)',
  );
  let closing: Promise<void> | undefined;
  return {
    close: () => (closing ??= provider.shutdown().catch((err: unknown) => logger.warn({ err }, 'flushing the last spans failed'))),
  };
}

async function otlpExporter(): Promise<SpanExporter> {
  try {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
    // Reads OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, _HEADERS and _TIMEOUT itself.
    return new OTLPTraceExporter();
  } catch (err) {
    throw new Error(`OTEL_TRACES_EXPORTER=otlp needs the optional dependency @opentelemetry/exporter-trace-otlp-http: ${(err as Error).message}`);
  }
}
