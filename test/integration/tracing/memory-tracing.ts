/**
 * An in-memory OpenTelemetry SDK for the tracing tests: every ended span kept, looked up by name
 * and drawn as a tree. Registered globally (the way an application registers its SDK), so it
 * must start before the servers under test are built.
 */
import { trace, context, propagation } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { loadBullTelemetry } from '../../../src/tracing/bullmq.js';

export interface MemoryTracing {
  readonly exporter: InMemorySpanExporter;
  spans(): ReadableSpan[];
  /** The one ended span with this name (and matching `where`); fails when none or several. */
  one(name: string, where?: (s: ReadableSpan) => boolean): ReadableSpan;
  /** A trace's spans as an indented tree of names: `parent > child` lines, children by start time. */
  tree(traceId: string): string[];
  close(): Promise<void>;
}

export async function startMemoryTracing(): Promise<MemoryTracing> {
  const exporter = new InMemorySpanExporter();
  const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  provider.register();
  await loadBullTelemetry();
  const spans = (): ReadableSpan[] => exporter.getFinishedSpans();
  return {
    exporter,
    spans,
    one(name, where = () => true) {
      const found = spans().filter((s) => s.name === name && where(s));
      if (found.length !== 1)
        throw new Error(
          `${found.length} spans named ${name}; all: ${spans()
            .map((s) => s.name)
            .join(', ')}`,
        );
      return found[0]!;
    },
    tree(traceId) {
      const inTrace = spans().filter((s) => s.spanContext().traceId === traceId);
      const ids = new Set(inTrace.map((s) => s.spanContext().spanId));
      const lines: string[] = [];
      const walk = (parent: string | undefined, depth: number): void => {
        const children = inTrace
          .filter((s) => (parent === undefined ? !s.parentSpanContext || !ids.has(s.parentSpanContext.spanId) : s.parentSpanContext?.spanId === parent))
          .sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1]);
        for (const s of children) {
          lines.push(`${'  '.repeat(depth)}${s.name}`);
          walk(s.spanContext().spanId, depth + 1);
        }
      };
      walk(undefined, 0);
      return lines;
    },
    async close() {
      await provider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}
