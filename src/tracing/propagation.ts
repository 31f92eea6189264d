import { ROOT_CONTEXT, context, propagation, trace, type Context, type Link, type TextMapGetter, type TextMapSetter } from '@opentelemetry/api';
import { tracingOn } from './tracer.js';

/**
 * Message headers as Kafka clients hold them (KafkaJS's IHeaders, and what a second driver maps to):
 * W3C `traceparent`/`tracestate` travel here, so the functions below know no Kafka client.
 */
export type HeaderRecord = Record<string, Buffer | string | (Buffer | string)[] | undefined>;

const setter: TextMapSetter<HeaderRecord> = {
  set(carrier, key, value) {
    carrier[key] = value;
  },
};

const getter: TextMapGetter<HeaderRecord> = {
  keys: (carrier) => Object.keys(carrier),
  get(carrier, key) {
    const raw = carrier[key];
    const value = Array.isArray(raw) ? raw[0] : raw;
    return value === undefined ? undefined : typeof value === 'string' ? value : value.toString('utf8');
  },
};

/**
 * The active context's trace headers added to `headers` (a new record when none is given), or
 * `headers` untouched — undefined stays undefined — when tracing is off: a message sent untraced
 * carries no extra bytes.
 */
export function injectTraceHeaders(headers?: HeaderRecord, from: Context = context.active()): HeaderRecord | undefined {
  if (!tracingOn() || trace.getSpan(from) === undefined) return headers;
  const carrier = headers ?? {};
  propagation.inject(from, carrier, setter);
  return carrier;
}

/** The context a message's headers carry (its sender's span as remote parent), or the root when none. */
export function extractTraceContext(headers: HeaderRecord | undefined): Context {
  if (!headers || !tracingOn()) return ROOT_CONTEXT;
  return propagation.extract(ROOT_CONTEXT, headers, getter);
}

/** A link to the span a message's headers name (a pool block's producer), or undefined when they name none. */
export function linkFromHeaders(headers: HeaderRecord | undefined): Link | undefined {
  const spanContext = trace.getSpanContext(extractTraceContext(headers));
  return spanContext ? { context: spanContext } : undefined;
}
