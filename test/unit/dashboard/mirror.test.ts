import { describe, expect, it } from 'vitest';
import { LastKnown } from '../../../src/core/last-known.js';
import { MirroredDashboardStore } from '../../../src/dashboard/mirror.js';
import { MemoryDashboardStore, type ProcessReport, type RefillEvent } from '../../../src/dashboard/store.js';
import { dashboardView } from '../../../src/dashboard/view.js';
import type { BizTag } from '../../../src/core/ports.js';

const NOW = 1_800_000_000_000;
const limits = { samples: 100, refills: 100 };
const report = (id: string, at = NOW): ProcessReport => ({
  id,
  host: 'vm',
  pid: 1,
  roles: ['api'],
  version: 't',
  startedAt: 0,
  at,
  status: 'ready',
  checks: {},
  issued: {},
});
const refill = (at: number, bizTag = 'a'): RefillEvent => ({ at, bizTag, shard: 0, reason: 'cron', status: 'pushed', ms: 1, segments: 1, ids: 10, by: 'vm:2' });

/** A shared store (Redis in production) that can be switched off. */
class Switchable extends MemoryDashboardStore {
  down = false;
  hang = false;
  private check(): Promise<void> {
    if (this.hang) return new Promise(() => undefined);
    return this.down ? Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379')) : Promise.resolve();
  }
  override async samples(since: number) {
    await this.check();
    return super.samples(since);
  }
  override async refills(since: number) {
    await this.check();
    return super.refills(since);
  }
  override async reports() {
    await this.check();
    return super.reports();
  }
  override async putReport(r: ProcessReport) {
    await this.check();
    return super.putReport(r);
  }
  override async addSample(s: Parameters<MemoryDashboardStore['addSample']>[0]) {
    await this.check();
    return super.addSample(s);
  }
  override async claimSample(at: number, ttl: number) {
    await this.check();
    return super.claimSample(at, ttl);
  }
}

describe('MirroredDashboardStore', () => {
  it('keeps what it read from the shared store and what it wrote: with the store down the page gets the history from memory, and why', async () => {
    const shared = new Switchable(limits);
    const mirror = new MirroredDashboardStore({ shared, limits, historyMs: 3_600_000 });
    // Written by other processes into the shared store.
    await shared.addSample({ at: NOW - 2000, pools: [], issued: {} });
    await shared.addRefill(refill(NOW - 1500));
    await shared.putReport(report('vm:2'));
    await mirror.sync(NOW);
    expect(mirror.error).toBeUndefined();

    shared.down = true;
    // This process keeps reporting and sampling into its memory.
    await expect(mirror.putReport(report('vm:1'))).resolves.toBeUndefined();
    expect(await mirror.claimSample(NOW, 2000)).toBe(true);
    await mirror.addSample({ at: NOW, pools: [], issued: {} });
    const read = await mirror.read(0);
    expect(read.error).toMatch(/ECONNREFUSED/);
    expect(read.samples.map((s) => s.at)).toEqual([NOW - 2000, NOW]);
    expect(read.refills.map((e) => e.at)).toEqual([NOW - 1500]);
    expect(read.reports.map((r) => r.id).sort()).toEqual(['vm:1', 'vm:2']);

    shared.down = false;
    const back = await mirror.read(NOW - 1);
    expect(back.error).toBeUndefined();
    expect(back.samples.map((s) => s.at)).toEqual([NOW]);
  });

  it('answers from memory when the shared store hangs, within its timeout', async () => {
    const shared = new Switchable(limits);
    const mirror = new MirroredDashboardStore({ shared, limits, historyMs: 3_600_000, timeoutMs: 50 });
    await mirror.addRefill(refill(NOW));
    shared.hang = true;
    const read = await mirror.read(0);
    expect(read.error).toMatch(/did not complete within 50 ms/);
    expect(read.refills).toHaveLength(1);
  });

  it('without a shared store it is the history in memory: bounded, one entry per key, oldest first', async () => {
    const mirror = new MirroredDashboardStore({ limits: { samples: 3, refills: 3 }, historyMs: 3_600_000 });
    for (const at of [5, 1, 3, 2, 4, 4]) await mirror.addSample({ at, pools: [], issued: {} });
    expect((await mirror.samples(0)).map((s) => s.at)).toEqual([3, 4, 5]);
    expect((await mirror.read(0)).error).toBeUndefined();
    expect(await mirror.claimSample(1000, 1)).toBe(true);
    expect(await mirror.claimSample(1000, 1)).toBe(false);
  });
});

describe('LastKnown', () => {
  it('answers the last value read with the error while the read fails, and nothing before the first success', async () => {
    let fail = true;
    const known = new LastKnown(async () => (fail ? Promise.reject(new Error('down')) : ['x']), { what: 'reading', timeoutMs: 100, now: () => 42 });
    expect(await known.get()).toEqual({ value: undefined, at: undefined, error: 'down' });
    fail = false;
    expect(await known.get()).toEqual({ value: ['x'], at: 42 });
    fail = true;
    expect(await known.get()).toEqual({ value: ['x'], at: 42, error: 'down' });
  });
});

describe('dashboardView', () => {
  const tags = [{ bizTag: 'a', mode: 'segment', pool: 'redis-list', shards: 1, fallback: 'snowflake' }] as BizTag[];
  const base = {
    now: NOW,
    sampleMs: 1000,
    storeKind: 'redis' as const,
    self: { ...report('vm:1'), status: 'degraded' as const, checks: { database: { ok: false, message: 'ECONNREFUSED' } } },
  };

  it('with Postgres down: the tags as last read, Postgres named as down (once), and where the tags come from', () => {
    const view = dashboardView({
      ...base,
      tags: { value: tags, at: NOW - 30_000, error: 'ECONNREFUSED' },
      history: { samples: [], refills: [], reports: [] },
      held: { samples: [], refills: [] },
    });
    expect(view.tags.map((t) => t.bizTag)).toEqual(['a']);
    expect(view.tagsFrom).toEqual({ source: 'memory', at: NOW - 30_000 });
    expect(view.down.map((d) => [d.id, d.name])).toEqual([['postgres', 'Postgres']]);
    expect(view.down[0]!.message).toMatch(/the tags as read 30 s ago/);
    expect(view.summary.serversDown).toEqual(['Postgres']);
    expect(view.tagsError).toBe('ECONNREFUSED');
  });

  it('with no tag list ever read: the tags the history names', () => {
    const held = {
      samples: [{ at: NOW, pools: [{ bizTag: 'b', shard: 0, kind: 'redis-list', depth: 1, target: 100, rate: 0 }], issued: {} }],
      refills: [refill(NOW, 'c')],
    };
    const view = dashboardView({
      ...base,
      tags: { value: undefined, at: undefined, error: 'timeout' },
      history: { samples: [], refills: [], reports: [] },
      held,
    });
    expect(view.tags.map((t) => [t.bizTag, t.mode])).toEqual([
      ['b', 'unknown'],
      ['c', 'unknown'],
    ]);
    expect(view.tagsFrom).toEqual({ source: 'history' });
    expect(view.summary.belowTarget).toEqual(['b']);
  });

  it('with Redis down: Redis named as down, the history from memory, the other processes unheard', () => {
    const self = { ...report('vm:1'), checks: { redis: { ok: false, message: 'redis is reconnecting' } } };
    const view = dashboardView({
      ...base,
      self,
      tags: { value: tags, at: NOW },
      history: { samples: [], refills: [], reports: [report('vm:2', NOW - 60_000)], error: 'ECONNREFUSED' },
      held: { samples: [], refills: [] },
    });
    expect(view.down.map((d) => d.id)).toEqual(['redis']);
    expect(view.storeError).toBe('ECONNREFUSED');
    expect(view.processes.map((p) => p.state)).toEqual(['ready', 'unheard']);
    expect(view.summary.silentProcesses).toEqual([]);
  });
});
