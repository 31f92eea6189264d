import { SpanKind, trace, type Tracer } from '@opentelemetry/api';
import { ATTR } from './dispense.js';
import { injectTraceHeaders } from './propagation.js';
import { inSpan, tracingOn } from './tracer.js';

/** What this file needs of the SDK's IdTransport (src/client/transport.ts), so tracing does not import the client. */
interface Batch {
  readonly source: string;
}
interface Transport<B extends Batch> {
  fetch(bizTag: string, count: number): Promise<B>;
  fetchBlocks?(bizTag: string, count: number): Promise<B>;
  close(): Promise<void>;
}

/** The SDK's spans have their own scope: an application can tell its client calls from a server's work. */
const clientTracer: Tracer = trace.getTracer('idmint/client');

/**
 * The transport with a CLIENT span around each fetch (`idmint.client.fetch`), made only while the
 * application has a tracer provider registered; otherwise each call goes straight through.
 */
export function tracedTransport<B extends Batch, T extends Transport<B>>(transport: T): Transport<B> {
  const fetchBlocks = transport.fetchBlocks?.bind(transport);
  return {
    fetch: (bizTag, count) =>
      tracingOn() ? traceFetch('idmint.client.fetch', bizTag, count, () => transport.fetch(bizTag, count)) : transport.fetch(bizTag, count),
    ...(fetchBlocks
      ? {
          fetchBlocks: (bizTag: string, count: number) =>
            tracingOn() ? traceFetch('idmint.client.fetch_blocks', bizTag, count, () => fetchBlocks(bizTag, count)) : fetchBlocks(bizTag, count),
        }
      : {}),
    close: () => transport.close(),
  };
}

function traceFetch<B extends Batch>(name: string, bizTag: string, count: number, run: () => Promise<B>): Promise<B> {
  return inSpan(
    name,
    { kind: SpanKind.CLIENT, attributes: { [ATTR.bizTag]: bizTag, [ATTR.count]: count } },
    async (span) => {
      const batch = await run();
      span?.setAttribute(ATTR.source, batch.source);
      return batch;
    },
    clientTracer,
  );
}

/** HTTP request headers with the active span's `traceparent` (the same object when tracing is off). */
export function withHttpTraceHeaders(headers: Record<string, string>): Record<string, string> {
  if (!tracingOn()) return headers;
  const carrier: Record<string, string> = { ...headers };
  injectTraceHeaders(carrier);
  return carrier;
}
