import type { Telemetry } from 'bullmq';
import { tracingOn } from './tracer.js';

let telemetry: Telemetry | undefined;

/**
 * BullMQ's telemetry (bullmq-otel), loaded once a tracer provider is registered: queues and workers
 * built after this pass it as their `telemetry` option, so a job's `add` span is a child of the
 * request that asked for it and its `process` span continues that trace. Returns undefined (and
 * loads nothing) with tracing off, or when the optional dependency is not installed.
 */
export async function loadBullTelemetry(): Promise<Telemetry | undefined> {
  if (telemetry || !tracingOn()) return telemetry;
  try {
    const { BullMQOtel } = await import('bullmq-otel');
    telemetry = new BullMQOtel({ tracerName: 'idmint/refill' }) as unknown as Telemetry;
  } catch {
    telemetry = undefined;
  }
  return telemetry;
}

/** The telemetry loadBullTelemetry() loaded, or undefined (BullMQ then traces nothing). */
export function bullTelemetry(): Telemetry | undefined {
  return telemetry;
}
