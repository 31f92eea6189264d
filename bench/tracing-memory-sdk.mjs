// Preloaded (node --import) into the "tracing on" server of bench/tracing.bench.ts: the way an
// application registers its own SDK before idmint loads. Spans go through a BatchSpanProcessor
// to an in-memory exporter (emptied as it fills), so the cost measured is idmint's spans and the
// SDK's, not a console or a network.
import { BatchSpanProcessor, InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

class DrainingExporter extends InMemorySpanExporter {
  export(spans, done) {
    super.export(spans, done);
    if (this.getFinishedSpans().length > 100_000) this.reset();
  }
}

new NodeTracerProvider({ spanProcessors: [new BatchSpanProcessor(new DrainingExporter())] }).register();
