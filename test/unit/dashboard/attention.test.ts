import { describe, expect, it } from 'vitest';
import { serversDown, summarize, tagRows, type TagInfo } from '../../../src/dashboard/attention.js';
import { processRows } from '../../../src/dashboard/processes.js';
import type { PoolPoint, ProcessReport, RefillEvent, Sample } from '../../../src/dashboard/store.js';

const NOW = 1_800_000_000_000;
const tag = (bizTag: string, fields: Partial<TagInfo> = {}): TagInfo => ({
  bizTag,
  mode: 'segment',
  pool: 'redis-list',
  shards: 1,
  fallback: 'snowflake',
  ...fields,
});
const pool = (bizTag: string, depth: number, target: number | null, shard = 0): PoolPoint => ({ bizTag, shard, kind: 'redis-list', depth, target, rate: 1 });
const sample = (at: number, pools: PoolPoint[]): Sample => ({ at, pools, issued: {} });
const refill = (bizTag: string, at: number, status: RefillEvent['status'], fields: Partial<RefillEvent> = {}): RefillEvent => ({
  at,
  bizTag,
  shard: 0,
  reason: 'threshold',
  status,
  ms: 5,
  segments: status === 'pushed' ? 1 : 0,
  ids: status === 'pushed' ? 100 : 0,
  by: 'vm:1',
  ...fields,
});

describe('tag rows', () => {
  it('sums shards from the newest sample that holds the tag, and computes the fill ratio', () => {
    const rows = tagRows(
      [tag('a', { shards: 2 }), tag('b'), tag('c', { mode: 'snowflake' })],
      [sample(NOW - 2000, [pool('a', 10, 100), pool('b', 5, 100)]), sample(NOW - 1000, [pool('a', 30, 100, 0), pool('a', 50, 100, 1)]), sample(NOW, [])],
      [],
    );
    expect(rows.map((r) => [r.bizTag, r.depth, r.target, r.fill, r.sampledAt])).toEqual([
      ['a', 80, 200, 0.4, NOW - 1000],
      ['b', 5, 100, 0.05, NOW - 2000],
      ['c', null, null, null, null],
    ]);
    // Under 20 % of its target (the refill threshold) a pool is below target.
    expect(rows.map((r) => r.attention)).toEqual([[], ['below-target'], []]);
  });

  it('a pool with no target (its meta lost with Redis, or never refilled) has no fill ratio; empty, it is below target', () => {
    const [empty, some] = tagRows([tag('a'), tag('b')], [sample(NOW, [pool('a', 0, null), pool('b', 10, null)])], []);
    expect(empty).toMatchObject({ depth: 0, target: null, fill: null, attention: ['below-target'] });
    expect(some).toMatchObject({ depth: 10, target: null, fill: null, attention: [] });
  });

  it('failing refills: the shards whose refills failed since their last push; skips change nothing, a push ends it', () => {
    const events = [
      refill('a', NOW - 5000, 'pushed'),
      refill('a', NOW - 4000, 'failed', { why: 'first' }),
      refill('a', NOW - 3000, 'skipped'),
      refill('a', NOW - 2000, 'failed', { why: 'SEGMENT_EXHAUSTED' }),
      refill('a', NOW - 1000, 'failed', { shard: 1, why: 'other shard' }),
      refill('b', NOW - 3000, 'failed'),
      refill('b', NOW - 1000, 'pushed'),
    ];
    const [a, b] = tagRows([tag('a', { shards: 2 }), tag('b')], [], events);
    expect(a!.failing).toEqual({ shards: 2, failures: 3, since: NOW - 4000, why: 'other shard' });
    expect(a!.attention).toEqual(['failing-refills']);
    expect(a!.lastRefillAt).toBe(NOW - 5000);
    expect(b!.failing).toBeNull();
    expect(b!.lastRefillAt).toBe(NOW - 1000);
  });
});

describe('servers down and the summary', () => {
  const report = (id: string, fields: Partial<ProcessReport>): ProcessReport => ({
    id,
    host: 'vm',
    pid: 1,
    roles: ['api'],
    version: 't',
    startedAt: 0,
    at: NOW,
    status: 'ready',
    checks: {},
    issued: {},
    ...fields,
  });

  it('names each server once: first what this page could not read, then the failing checks of fresh reports only', () => {
    const self = report('vm:1', {
      address: 'a:1',
      status: 'degraded',
      checks: { database: { ok: false, message: 'ECONNREFUSED' }, redis: { ok: true }, snowflake: { ok: false, message: 'not a server' } },
    });
    const responder = report('vm:2', {
      address: 'b:1',
      roles: ['responder'],
      checks: { kafka: { ok: false, message: 'broker down' }, zookeeper: { ok: false, message: 'lost' } },
    });
    const silent = report('vm:3', { address: 'c:1', at: NOW - 60_000, checks: { redis: { ok: false, message: 'old news' } } });
    const processes = processRows({ reports: [responder, silent], self, now: NOW, sampleMs: 1000, heard: true });
    const down = serversDown(processes, [{ id: 'postgres', name: 'Postgres', message: 'the tags cannot be read' }]);
    expect(down).toEqual([
      { id: 'postgres', name: 'Postgres', message: 'the tags cannot be read', by: ['a:1 (api)'] },
      { id: 'kafka', name: 'Kafka', message: 'broker down', by: ['b:1 (responder)'] },
      { id: 'zookeeper', name: 'ZooKeeper', message: 'lost', by: ['b:1 (responder)'] },
    ]);
    const rows = tagRows([tag('low'), tag('ok'), tag('broken')], [sample(NOW, [pool('low', 1, 100), pool('ok', 90, 100)])], [refill('broken', NOW, 'failed')]);
    expect(summarize(rows, processes, down)).toEqual({
      tags: 3,
      belowTarget: ['low'],
      failingRefills: ['broken'],
      silentProcesses: ['c:1 (api)'],
      serversDown: ['Postgres', 'Kafka', 'ZooKeeper'],
    });
  });
});
