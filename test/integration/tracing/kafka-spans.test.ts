import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { SpanKind } from '@opentelemetry/api';
import type { Kafka } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafkaClient, type IdmintKafkaClient } from '../../../src/client/kafka/rpc-client.js';
import { KafkaPoolSink } from '../../../src/pool/kafka/sink.js';
import { KafkaPoolConsumer } from '../../../src/client/kafka/pool-consumer.js';
import { inSpan } from '../../../src/tracing/tracer.js';
import { createTopic, deleteTopics, kafkaPoolTags, testKafka } from '../../support/kafka.js';
import { env } from '../../support/env.js';
import { freshStore, type TestStore } from '../../support/store.js';
import { uniqueName } from '../../support/names.js';
import { untilValue } from '../../support/poll.js';
import { TEST_SIGNING_SECRET, TEST_VERIFY_KEY, testSigner } from '../../support/signing.js';
import { startMemoryTracing, type MemoryTracing } from './memory-tracing.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));

/** A span as OTLP/JSON carries it (ids in hex). */
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  links?: Array<{ traceId: string; spanId: string }>;
}

/** The smallest OTLP/HTTP receiver: every span the responder process exports, in arrival order. */
async function otlpReceiver(): Promise<{ server: Server; url: string; spans: OtlpSpan[] }> {
  const spans: OtlpSpan[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      const payload = JSON.parse(body) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: OtlpSpan[] }> }> };
      for (const r of payload.resourceSpans) for (const s of r.scopeSpans) spans.push(...s.spans);
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans };
}

// The SDK in this process, the responder in another (the real worker, its SDK started by
// IDMINT_OTEL=1 and exporting OTLP to a receiver here): one trace across both, both ways.
describe('trace of a Kafka request/reply across two processes', () => {
  let tracing: MemoryTracing;
  let store: TestStore;
  let kafka: Kafka;
  let receiver: Awaited<ReturnType<typeof otlpReceiver>>;
  let responder: ChildProcess | undefined;
  let client: IdmintKafkaClient;
  const requestTopic = uniqueName('idmint.requests.trace');
  const groupId = uniqueName('idmint.responders.trace');

  beforeAll(async () => {
    tracing = await startMemoryTracing();
    store = await freshStore('trk');
    await store.store.createBiz({ bizTag: 'order', step: 500 });
    kafka = testKafka();
    await createTopic(kafka, requestTopic, 1);
    receiver = await otlpReceiver();
    const child = spawn(process.execPath, ['--import', 'tsx', 'workers/responder.ts'], {
      cwd: root,
      env: {
        ...process.env,
        IDMINT_PORT: '0',
        KAFKA_BROKERS: env('KAFKA_BROKERS'),
        DATABASE_URL: env('DATABASE_URL'),
        IDMINT_PG_SCHEMA: store.schema,
        REDIS_URL: '',
        ZK_CONNECT: '',
        IDMINT_KAFKA_REQUEST_TOPIC: requestTopic,
        IDMINT_KAFKA_RESPONDER_GROUP: groupId,
        IDMINT_SIGNING_KEY: TEST_SIGNING_SECRET,
        IDMINT_OTEL: '1',
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_BSP_SCHEDULE_DELAY: '100',
        OTEL_SERVICE_NAME: 'idmint-responder-test',
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    responder = child;
    await new Promise<void>((resolve, reject) => {
      let output = '';
      child.stdout!.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('"msg":"responder ready"')) resolve();
      });
      child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.on('exit', (code) => reject(new Error(`responder exited with ${code} before it was ready:\n${output}`)));
    });
    client = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, requestTopic, clientId: 'trace-test' });
    await client.start();
  });

  afterAll(async () => {
    await client?.close();
    responder?.kill('SIGTERM');
    await deleteTopics(kafka, [requestTopic]).catch(() => undefined);
    receiver?.server.close();
    await store?.close();
    await tracing?.close();
  });

  it("one trace id from the SDK's request through the responder's dispense, and the reply links back", async () => {
    const ids = await client.getIds('order', 5, { timeoutMs: 20_000 });
    expect(ids).toHaveLength(5);

    const send = tracing.one(`send ${requestTopic}`);
    expect(send.kind).toBe(SpanKind.PRODUCER);
    expect(send.attributes).toMatchObject({ 'messaging.system': 'kafka', 'messaging.destination.name': requestTopic, 'idmint.biz_tag': 'order' });
    const traceId = send.spanContext().traceId;

    const remote = await untilValue(
      "the responder's spans",
      () => receiver.spans.filter((s) => s.traceId === traceId),
      (spans) => spans.some((s) => s.name === 'idmint.dispense'),
    );
    const processed = remote.find((s) => s.name === `process ${requestTopic}`)!;
    // The responder's CONSUMER span is the child of the SDK's PRODUCER span, in another process.
    expect(processed).toBeDefined();
    // OTLP numbers kinds one above the api's enum (0 is UNSPECIFIED there).
    expect(processed.kind).toBe(SpanKind.CONSUMER + 1);
    expect(processed.parentSpanId).toBe(send.spanContext().spanId);
    const dispense = remote.find((s) => s.name === 'idmint.dispense')!;
    expect(dispense.parentSpanId).toBe(processed.spanId);
    expect(remote.some((s) => s.name === 'idmint.pool.take' && s.parentSpanId === dispense.spanId)).toBe(true);
    // The reply carried the responder's context back: the SDK's span links to its process span.
    expect(send.links.map((l) => [l.context.traceId, l.context.spanId])).toEqual([[traceId, processed.spanId]]);
  });

  it("pool blocks carry the refill's context, and a take from a block links to the block's producer span", async () => {
    const tags = kafkaPoolTags(() => store.store);
    const bizTag = await tags.create('traced');
    const sink = new KafkaPoolSink({ signer: testSigner, kafka, blockSize: 100 });
    const consumer = new KafkaPoolConsumer({ verifyKey: TEST_VERIFY_KEY, kafka, bizTag, bufferBlocks: 2 });
    try {
      // As a refill job would: the publication runs inside the job's span.
      await inSpan('refill job', {}, async () => sink.push(await store.store.allocate(bizTag, 300)));
      const producer = tracing.one(`send idmint.ids.${bizTag}`);
      expect(producer.kind).toBe(SpanKind.PRODUCER);
      expect(producer.attributes).toMatchObject({ 'messaging.system': 'kafka', 'messaging.batch.message_count': 3 });
      expect(producer.parentSpanContext?.spanId).toBe(tracing.one('refill job').spanContext().spanId);

      const ids = await inSpan('application take', {}, () => consumer.take(150, { timeoutMs: 20_000 }));
      expect(ids).toHaveLength(150);
      const take = tracing.one('application take');
      // Two blocks of 100 were taken from: both carry the same producer span.
      expect(take.links.map((l) => l.context.spanId)).toEqual([producer.spanContext().spanId, producer.spanContext().spanId]);
    } finally {
      await consumer.close();
      await sink.deleteTopics(bizTag).catch(() => undefined);
      await sink.close();
    }
  });
});
