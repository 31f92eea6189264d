import { SpanKind, context, trace, type Attributes, type Span } from '@opentelemetry/api';
import { extractTraceContext, injectTraceHeaders, linkFromHeaders, type HeaderRecord } from './propagation.js';
import { idmintTracer, inSpan, tracingOn } from './tracer.js';

/**
 * Kafka spans by the messaging conventions (`send <topic>` PRODUCER, `process <topic>` CONSUMER,
 * `messaging.*` attributes), over plain header records: each function is called at one spot in
 * the request/reply client, the responder, the pool-block writer and reader, so no Kafka client
 * type reaches this folder.
 */

interface MessageLike {
  headers?: HeaderRecord;
}

function kafkaAttributes(topic: string, operation: 'send' | 'process' | 'receive', extra: Attributes = {}): Attributes {
  return {
    'messaging.system': 'kafka',
    'messaging.operation.type': operation,
    'messaging.operation.name': operation,
    'messaging.destination.name': topic,
    ...extra,
  };
}

/**
 * The SDK's request over Kafka, a PRODUCER span from the send to the reply: the request message
 * built inside `run` carries its context (see withTraceHeaders), so the responder's work is its child.
 */
export function traceKafkaRequest<T>(topic: string, bizTag: string, count: number, run: () => Promise<T>): Promise<T> {
  if (!tracingOn()) return run();
  return inSpan(
    `send ${topic}`,
    { kind: SpanKind.PRODUCER, attributes: kafkaAttributes(topic, 'send', { 'idmint.biz_tag': bizTag, 'idmint.count': count }) },
    () => run(),
    idmintTracer(),
  );
}

/** The message with the active context's `traceparent` in its headers (untouched when tracing is off). */
export function withTraceHeaders<M extends MessageLike>(message: M): M {
  if (!tracingOn()) return message;
  const headers = injectTraceHeaders(message.headers);
  if (headers) message.headers = headers;
  return message;
}

/** The span a reply is waited in (captured with the request), or undefined with tracing off. */
export function replyWaiter(): Span | undefined {
  return tracingOn() ? trace.getActiveSpan() : undefined;
}

/** Links the waiting request's span to the responder's span its reply names (the trace context coming back). */
export function linkReply(waiter: Span | undefined, headers: HeaderRecord | undefined): void {
  if (!waiter) return;
  const link = linkFromHeaders(headers);
  if (link) waiter.addLink(link);
}

/**
 * The responder's handling of one request: a CONSUMER span, child of the context the request
 * carries; the reply `run` builds gets this span's context in its headers, so the caller sees it.
 */
export function traceKafkaProcess<R extends { message: MessageLike } | null>(
  topic: string,
  message: { headers?: HeaderRecord; offset: string; key?: Buffer | string | null },
  partition: number,
  group: string,
  run: () => Promise<R>,
): Promise<R> {
  if (!tracingOn()) return run();
  const attributes = kafkaAttributes(topic, 'process', {
    'messaging.destination.partition.id': String(partition),
    'messaging.kafka.offset': Number(message.offset),
    'messaging.consumer.group.name': group,
    ...(message.key ? { 'messaging.kafka.message.key': message.key.toString() } : {}),
  });
  return inSpan(`process ${topic}`, { kind: SpanKind.CONSUMER, attributes, parent: extractTraceContext(message.headers) }, async () => {
    const reply = await run();
    if (reply) withTraceHeaders(reply.message);
    return reply;
  });
}

/**
 * The publication of a segment's blocks, a PRODUCER span under the refill job's span, whose
 * context every block carries: a consumer that takes from a block links its take to it.
 */
export function traceBlocksSend<M extends MessageLike>(topic: string, messages: M[], send: () => Promise<void>): Promise<void> {
  if (!tracingOn()) return send();
  const attributes = kafkaAttributes(topic, 'send', { 'messaging.batch.message_count': messages.length });
  return inSpan(`send ${topic}`, { kind: SpanKind.PRODUCER, attributes }, async () => {
    for (const m of messages) withTraceHeaders(m);
    await send();
  });
}

/** A block's producer context as a link (undefined with tracing off, or none carried). */
export { linkFromHeaders as blockLink };

/** Adds a taken block's producer link to the active span (the SDK's take), if both exist. */
export function linkTake(link: ReturnType<typeof linkFromHeaders>): void {
  if (link) trace.getSpan(context.active())?.addLink(link);
}
