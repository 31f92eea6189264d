import type { FastifyInstance } from 'fastify';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Dispenser } from '../../../src/dispenser/dispenser.js';
import { MemoryPool } from '../../../src/dispenser/sources/memory.js';
import { segmentSource } from '../../../src/dispenser/sources/segment.js';
import { createSnowflakeSource, type SnowflakeSource } from '../../../src/dispenser/sources/snowflake.js';
import { StaticWorkerIdProvider } from '../../../src/worker-id/static-provider.js';
import { fenceStore } from '../../../src/fence/fence.js';
import { ZookeeperFence } from '../../../src/fence/zookeeper-fence.js';
import { createFastify } from '../../../src/http/base.js';
import { idRoutes } from '../../../src/http/routes-ids.js';
import { freshStore, type TestStore } from '../../support/store.js';
import { env } from '../../support/env.js';
import { uid, uniqueName } from '../../support/names.js';
import { untilValue } from '../../support/poll.js';
import { startHarness, type Harness } from '../refill/helpers.js';
import { startMemoryTracing, type MemoryTracing } from './memory-tracing.js';
import { createIdmintClient } from '../../../src/client/client.js';

// The span tree of one HTTP request on each source, with an in-memory exporter: real Postgres,
// Redis, BullMQ and ZooKeeper (the segment fence), the route served through fastify's inject().
describe('traces of HTTP requests, one per source', () => {
  let tracing: MemoryTracing;
  let store: TestStore;
  let harness: Harness;
  let fence: ZookeeperFence;
  let memory: MemoryPool;
  let snowflake: SnowflakeSource;
  let app: FastifyInstance;

  beforeAll(async () => {
    // First: the HTTP hooks and BullMQ's telemetry are installed only when a provider is registered.
    tracing = await startMemoryTracing();
    store = await freshStore('trc');
    fence = await ZookeeperFence.open({ connect: env('ZK_CONNECT'), root: `/idmint-test/${uniqueName('trace-fence')}` });
    const fenced = fenceStore(store.store, fence);
    harness = await startHarness({ redisUrl: env('REDIS_URL'), store: fenced, processor: { minDepth: 200 } });
    memory = new MemoryPool({ allocator: fenced });
    snowflake = await createSnowflakeSource({ provider: new StaticWorkerIdProvider(7) });
    const dispenser = new Dispenser({ store: fenced, pools: { memory, 'redis-list': harness.pool }, segment: segmentSource(fenced), snowflake });
    app = createFastify({ component: 'http' });
    await app.register(idRoutes, { dispenser, decode: () => ({}) });
    app.get('/healthz', async () => ({ status: 'ok' }));
    await app.ready();
  });

  afterAll(async () => {
    await app?.close();
    await memory?.close();
    await snowflake?.close();
    await harness?.close();
    await fence?.close();
    await store?.close();
    await tracing?.close();
  });

  async function get(bizTag: string, headers: Record<string, string> = {}): Promise<{ body: { source: string; ids: string[] }; traceId: string }> {
    const before = new Set(tracing.spans());
    const response = await app.inject({ method: 'GET', url: `/v1/ids/${bizTag}?count=3`, headers });
    const server = tracing.one('GET /v1/ids/:bizTag', (s) => !before.has(s) && s.attributes['url.path'] === `/v1/ids/${bizTag}`);
    return { body: response.json(), traceId: server.spanContext().traceId };
  }

  it('memory pool: the server span, the dispense, the pool take and the fenced segment allocation', async () => {
    const tag = await store.store.createBiz({ bizTag: `mem-${uid()}`, step: 100, pool: 'memory' });
    const { body, traceId } = await get(tag.bizTag);
    expect(body.source).toBe('pool');
    expect(tracing.tree(traceId)).toEqual([
      'GET /v1/ids/:bizTag',
      '  idmint.dispense',
      '    idmint.pool.take',
      '      idmint.segment.allocate',
      '        UPDATE idmint_segment',
      '        idmint.fence.claim',
    ]);
    const server = tracing.one('GET /v1/ids/:bizTag', (s) => s.spanContext().traceId === traceId);
    expect(server.kind).toBe(SpanKind.SERVER);
    expect(server.attributes).toMatchObject({ 'http.request.method': 'GET', 'http.route': '/v1/ids/:bizTag', 'http.response.status_code': 200 });
    expect(tracing.one('idmint.dispense', (s) => s.spanContext().traceId === traceId).attributes).toMatchObject({
      'idmint.biz_tag': tag.bizTag,
      'idmint.count': 3,
      'idmint.source': 'pool',
    });
    expect(tracing.one('idmint.pool.take', (s) => s.spanContext().traceId === traceId).attributes).toMatchObject({
      'idmint.pool.kind': 'memory',
      'idmint.taken': 3,
    });
    const update = tracing.one('UPDATE idmint_segment', (s) => s.spanContext().traceId === traceId);
    expect(update.kind).toBe(SpanKind.CLIENT);
    expect(update.attributes).toMatchObject({
      'db.system.name': 'postgresql',
      'db.collection.name': 'idmint_segment',
      'idmint.segment.start': 1,
      'idmint.segment.end': 100,
    });
    expect(tracing.one('idmint.fence.claim', (s) => s.spanContext().traceId === traceId).attributes).toMatchObject({ 'idmint.fence.claimed': true });
  });

  it('Redis pool: a dry pool falls back to a segment (fallback recorded), its threshold refill is a trace linked to the request, then Redis serves', async () => {
    const tag = await store.store.createBiz({ bizTag: `red-${uid()}`, step: 100, pool: 'redis-list' });
    const first = await get(tag.bizTag);
    expect(first.body.source).toBe('segment');
    const dispense = tracing.one('idmint.dispense', (s) => s.spanContext().traceId === first.traceId);
    expect(dispense.attributes).toMatchObject({ 'idmint.source': 'segment', 'idmint.fallback': 'segment' });
    const tree = tracing.tree(first.traceId);
    expect(tree.slice(0, 3)).toEqual(['GET /v1/ids/:bizTag', '  idmint.dispense', '    idmint.pool.take']);
    expect(tree).toContain('    idmint.segment.take');
    expect(tracing.one('idmint.pool.take', (s) => s.spanContext().traceId === first.traceId).attributes).toMatchObject({
      'idmint.pool.kind': 'redis-list',
      'idmint.taken': 0,
    });

    await untilValue(
      'the threshold refill',
      () => harness.pool.depth(tag.bizTag, 0),
      (depth) => depth > 0,
    );
    // The short take asked for a refill: BullMQ's `add` span sits under the pool take...
    expect(tracing.spans().some((s) => s.name.startsWith('add refill-') && s.spanContext().traceId === first.traceId)).toBe(true);
    // ...and the refill runs in a trace of its own (it outlives the request), linked to it.
    const refill = tracing.one('idmint.refill', (s) => s.attributes['idmint.biz_tag'] === tag.bizTag);
    expect(refill.attributes['idmint.refill.reason']).toBe('threshold');
    expect(refill.links.map((l) => l.context.traceId)).toEqual([first.traceId]);
    expect(refill.spanContext().traceId).not.toBe(first.traceId);
    expect(tracing.tree(refill.spanContext().traceId)).toEqual([
      `process ${harness.queue.settings.name}`,
      '  idmint.refill',
      '    idmint.segment.allocate',
      '      UPDATE idmint_segment',
      '      idmint.fence.claim',
      `  complete ${harness.queue.settings.name}`,
    ]);
    const second = await get(tag.bizTag);
    expect(second.body.source).toBe('pool');
    expect(tracing.tree(second.traceId)).toEqual(['GET /v1/ids/:bizTag', '  idmint.dispense', '    idmint.pool.take']);
  });

  it('Snowflake: the issue span carries the worker id', async () => {
    const tag = await store.store.createBiz({ bizTag: `sf-${uid()}`, mode: 'snowflake' });
    const { body, traceId } = await get(tag.bizTag);
    expect(body.source).toBe('snowflake');
    expect(tracing.tree(traceId)).toEqual(['GET /v1/ids/:bizTag', '  idmint.dispense', '    idmint.snowflake.issue']);
    expect(tracing.one('idmint.snowflake.issue', (s) => s.spanContext().traceId === traceId).attributes).toMatchObject({
      'idmint.worker_id': 7,
      'idmint.taken': 3,
    });
  });

  it("continues the caller's trace (traceparent) and records an error on the spans", async () => {
    const callerTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const bizTag = `none-${uid()}`;
    const response = await app.inject({ method: 'GET', url: `/v1/ids/${bizTag}`, headers: { traceparent: `00-${callerTrace}-00f067aa0ba902b7-01` } });
    expect(response.statusCode).toBe(404);
    const server = tracing.one('GET /v1/ids/:bizTag', (s) => s.spanContext().traceId === callerTrace);
    expect(server.parentSpanContext?.spanId).toBe('00f067aa0ba902b7');
    expect(server.attributes).toMatchObject({ 'http.response.status_code': 404, 'error.type': 'UNKNOWN_BIZ_TAG' });
    // A 4xx is the caller's mistake: the server span is not failed, the dispense span is.
    expect(server.status.code).toBe(SpanStatusCode.UNSET);
    const dispense = tracing.one('idmint.dispense', (s) => s.spanContext().traceId === callerTrace);
    expect(dispense.status.code).toBe(SpanStatusCode.ERROR);
    expect(dispense.attributes['error.type']).toBe('UNKNOWN_BIZ_TAG');
    expect(dispense.events.map((e) => e.name)).toEqual(['exception']);
  });

  it('leaves probes untraced', async () => {
    const before = tracing.spans().length;
    expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    expect(
      tracing
        .spans()
        .slice(before)
        .map((s) => s.name),
    ).toEqual([]);
  });

  it("the SDK's fetch is a CLIENT span whose traceparent the server continues", async () => {
    const tag = await store.store.createBiz({ bizTag: `sdk-${uid()}`, step: 100, pool: 'memory' });
    const address = await app.listen({ port: 0, host: '127.0.0.1' });
    const client = createIdmintClient({ url: address });
    try {
      expect(typeof (await client.next(tag.bizTag))).toBe('bigint');
    } finally {
      await client.close();
    }
    const fetch = tracing.one('idmint.client.fetch_blocks', (s) => s.attributes['idmint.biz_tag'] === tag.bizTag);
    expect(fetch.kind).toBe(SpanKind.CLIENT);
    expect(fetch.instrumentationScope.name).toBe('idmint/client');
    const server = tracing.one('GET /v1/blocks/:bizTag', (s) => s.attributes['url.path'] === `/v1/blocks/${tag.bizTag}`);
    expect(server.parentSpanContext?.spanId).toBe(fetch.spanContext().spanId);
    expect(server.spanContext().traceId).toBe(fetch.spanContext().traceId);
  });
});
