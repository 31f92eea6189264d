import { ATTR } from './dispense.js';
import { injectTraceHeaders, linkFromHeaders } from './propagation.js';
import { inSpan, tracingOn } from './tracer.js';

/** The W3C headers a refill job carries from the request (or sweep) that asked for it. */
export type TraceCarrier = Record<string, string>;

/**
 * The job fields that tie a refill to what asked for it: the asker's context in `trace`, and
 * BullMQ told not to make the job a child of it (a refill outlives the request: its own trace,
 * linked). Empty with tracing off, so the job is as before.
 */
export function refillJobTracing(): { data: { trace?: TraceCarrier }; opts: { telemetry?: { omitContext: boolean } } } {
  if (!tracingOn()) return NO_TRACING;
  const headers = injectTraceHeaders();
  if (!headers) return NO_TRACING;
  return { data: { trace: headers as TraceCarrier }, opts: { telemetry: { omitContext: true } } };
}

const NO_TRACING = Object.freeze({ data: Object.freeze({}), opts: Object.freeze({}) });

/** One refill job: an `idmint.refill` span linked to the request or sweep that asked for it. */
export function traceRefill<T>(bizTag: string, shard: number, reason: string, carrier: unknown, run: () => Promise<T>): Promise<T> {
  if (!tracingOn()) return run();
  const link = isCarrier(carrier) ? linkFromHeaders(carrier) : undefined;
  return inSpan(
    'idmint.refill',
    { attributes: { [ATTR.bizTag]: bizTag, [ATTR.shard]: shard, [ATTR.refillReason]: reason }, ...(link ? { links: [link] } : {}) },
    () => run(),
  );
}

/** The cron sweep: its own span (its job has no asker), parent of the refills it requests. */
export function traceSweep<T>(run: () => Promise<T>): Promise<T> {
  return inSpan('idmint.refill.sweep', {}, () => run());
}

function isCarrier(value: unknown): value is TraceCarrier {
  return typeof value === 'object' && value !== null && Object.values(value).every((v) => typeof v === 'string');
}
