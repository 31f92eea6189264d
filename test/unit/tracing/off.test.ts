import { describe, expect, it } from 'vitest';
import { withTraceHeaders } from '../../../src/tracing/messaging.js';
import { extractTraceContext, injectTraceHeaders, type HeaderRecord } from '../../../src/tracing/propagation.js';
import { refillJobTracing } from '../../../src/tracing/refill.js';
import { inSpan, tracingOn } from '../../../src/tracing/tracer.js';
import { ROOT_CONTEXT } from '@opentelemetry/api';

// No SDK registered: everything is as before tracing existed (no spans, no headers).
describe('tracing with no SDK registered', () => {
  it('is off, and inSpan runs the function with no span', async () => {
    expect(tracingOn()).toBe(false);
    expect(await inSpan('x', {}, async (span) => span)).toBeUndefined();
  });

  it('adds no headers to a message, and reads none', () => {
    const message: { key: string; value: string; headers?: HeaderRecord } = { key: 'k', value: 'v' };
    expect(withTraceHeaders(message)).toEqual({ key: 'k', value: 'v' });
    expect(injectTraceHeaders(undefined)).toBeUndefined();
    expect(extractTraceContext({ traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' })).toBe(ROOT_CONTEXT);
  });

  it('leaves a refill job as it was', () => {
    expect(refillJobTracing()).toEqual({ data: {}, opts: {} });
  });
});
