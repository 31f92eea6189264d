import {
  ProxyTracerProvider,
  SpanKind,
  SpanStatusCode,
  context,
  trace,
  type Attributes,
  type AttributeValue,
  type Context,
  type Link,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { isIdmintError } from '../core/errors.js';

/** The instrumentation scope every idmint span carries (the SDK's spans name `idmint/client`). */
export const TRACER_NAME = 'idmint';

/** What the api answers when no SDK is registered: the delegate of a proxy nobody set. */
const NOOP_PROVIDER = new ProxyTracerProvider().getDelegate();

/** A ProxyTracer: it follows whatever provider is registered later, so it is taken once here. */
const serverTracer: Tracer = trace.getTracer(TRACER_NAME);

/**
 * Whether a real tracer provider is registered (our SDK, or the application's). Two property reads
 * and no allocation: every hot path asks this first and takes its untraced branch when false, so
 * tracing off costs no span objects, closures or contexts.
 */
export function tracingOn(): boolean {
  const provider = trace.getTracerProvider() as Partial<ProxyTracerProvider>;
  if (typeof provider.getDelegate !== 'function') return true;
  const delegate = provider.getDelegate();
  // Another copy of the api (CommonJS beside ESM) has its own no-op singleton: compare by class too.
  return delegate !== NOOP_PROVIDER && delegate.constructor !== NOOP_PROVIDER.constructor;
}

export function idmintTracer(): Tracer {
  return serverTracer;
}

export interface SpanSpec {
  kind?: SpanKind;
  attributes?: Attributes;
  links?: Link[];
  /** The parent; default the active context. */
  parent?: Context;
}

/**
 * Runs `fn` inside a new active span, ended when it settles; a failure is recorded on the span and
 * rethrown. With tracing off, `fn()` alone (callers on a hot path test tracingOn() first, so they
 * do not even build the closure).
 */
export function inSpan<T>(name: string, spec: SpanSpec, fn: (span: Span | undefined) => Promise<T>, tracer: Tracer = serverTracer): Promise<T> {
  if (!tracingOn()) return fn(undefined);
  const options = {
    kind: spec.kind ?? SpanKind.INTERNAL,
    ...(spec.attributes ? { attributes: spec.attributes } : {}),
    ...(spec.links ? { links: spec.links } : {}),
  };
  return tracer.startActiveSpan(name, options, spec.parent ?? context.active(), async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      recordFailure(span, err);
      throw err;
    } finally {
      span.end();
    }
  });
}

/** Marks a span failed: the exception event, `error.type` (an IdmintError's code, else the class), status ERROR. */
export function recordFailure(span: Span, err: unknown): void {
  const error = err instanceof Error ? err : new Error(String(err));
  span.recordException(error);
  span.setAttribute('error.type', isIdmintError(error) ? error.code : error.constructor.name);
  span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
}

/** Sets an attribute on the active span, if any: free when tracing is off (no active span). */
export function annotate(key: string, value: AttributeValue): void {
  trace.getActiveSpan()?.setAttribute(key, value);
}

export { SpanKind };
