import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ClockBackwardsError, IdmintError } from '../../../src/core/errors.js';
import { FileWorkerIdProvider, LocalTimeMark, localMarkPath, readLocalMark, StaticWorkerIdProvider } from '../../../src/worker-id/index.js';
import type { WorkerIdLease } from '../../../src/core/ports.js';
import { until } from '../../support/poll.js';

const T0 = Date.UTC(2026, 0, 1);

/** Real time shifted by a settable offset: a clock that can be stepped back and still moves. */
function steppedClock(offsetMs = 0) {
  const c = { offset: offsetMs, now: () => Date.now() + c.offset };
  return c;
}

const fixedClock = (ms: number) => ({ now: () => ms });
const dir = () => mkdtempSync(join(tmpdir(), 'idmint-mark-'));

describe('LocalTimeMark', () => {
  it('writes the next mark in the background halfway to it, and raises the mark only once it is on disk', async () => {
    const dataDir = dir();
    const clock = { ms: T0, now: () => clock.ms };
    const mark = await LocalTimeMark.start({ dataDir, key: 'k', workerId: 1, source: 'file', clock, markAheadMs: 1000 });
    clock.ms = T0 + 600;
    mark.assertIssuable(T0 + 600); // past halfway: a background write of T0 + 1600 starts
    expect(mark.markMs).toBe(T0 + 1000); // not raised before the write is durable
    await until('the mark to be raised once its write is durable', () => mark.markMs !== T0 + 1000, { timeoutMs: 5000, intervalMs: 5 });
    expect(mark.markMs).toBe(T0 + 1600);
    expect(readLocalMark(mark.path)?.markMs).toBe(T0 + 1600);
  });

  it('never lets the file go below an approved timestamp, however background and synchronous writes interleave', async () => {
    const dataDir = dir();
    const clock = { ms: T0, now: () => clock.ms };
    const mark = await LocalTimeMark.start({ dataDir, key: 'k', workerId: 1, source: 'file', clock, markAheadMs: 100 });
    let approved = 0;
    for (let step = 0; step < 400; step++) {
      // Time moves by random amounts, sometimes back a little; the issuer sometimes outruns the mark.
      clock.ms += Math.floor(Math.random() * 60) - (step % 37 === 0 ? 30 : 0);
      const ts = Math.max(clock.ms, approved);
      mark.assertIssuable(ts);
      approved = Math.max(approved, ts);
      expect(readLocalMark(mark.path)!.markMs).toBeGreaterThanOrEqual(approved);
      expect(mark.markMs).toBeGreaterThanOrEqual(approved);
      if (step % 3 === 0) await new Promise((r) => setImmediate(r));
      expect(readLocalMark(mark.path)!.markMs).toBeGreaterThanOrEqual(mark.markMs);
    }
  });

  it('persists the worker id and a mark ahead of now', async () => {
    const dataDir = dir();
    const mark = await LocalTimeMark.start({ dataDir, key: 'k', workerId: 7, source: 'file', clock: fixedClock(T0), markAheadMs: 1000 });
    expect(mark.markMs).toBe(T0 + 1000);
    const state = readLocalMark(localMarkPath(dataDir, 'k'));
    expect(state).toMatchObject({ version: 1, workerId: 7, markMs: T0 + 1000, source: 'file' });
  });

  it('rewrites the file before an ID past the mark may leave', async () => {
    const dataDir = dir();
    const clock = { ms: T0, now: () => clock.ms };
    const mark = await LocalTimeMark.start({ dataDir, key: 'k', workerId: 1, source: 'file', clock, markAheadMs: 1000 });
    mark.assertIssuable(T0 + 1000);
    expect(readLocalMark(mark.path)?.markMs).toBe(T0 + 1000);
    clock.ms = T0 + 1001;
    mark.assertIssuable(T0 + 1001);
    expect(readLocalMark(mark.path)?.markMs).toBe(T0 + 2001);
    expect(mark.markMs).toBe(T0 + 2001);
  });

  it('refuses to start when the clock is behind the mark by more than the start wait, naming both times', async () => {
    const dataDir = dir();
    await LocalTimeMark.start({ dataDir, key: 'k', workerId: 1, source: 'file', clock: fixedClock(T0), markAheadMs: 1000 });
    const err = await LocalTimeMark.start({ dataDir, key: 'k', workerId: 1, source: 'file', clock: fixedClock(T0 - 2000), maxStartWaitMs: 1500 }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ClockBackwardsError);
    const e = err as ClockBackwardsError;
    expect(e.code).toBe('CLOCK_BACKWARDS');
    expect(e.lastMs).toBe(T0 + 1000);
    expect(e.nowMs).toBe(T0 - 2000);
    expect(e.message).toContain(new Date(T0 + 1000).toISOString());
    expect(e.message).toContain(new Date(T0 - 2000).toISOString());
  });

  it('waits out a small gap (a quick restart) and starts past the old mark', async () => {
    const dataDir = dir();
    const clock = steppedClock();
    const first = await LocalTimeMark.start({ dataDir, key: 'k', workerId: 1, source: 'file', clock, markAheadMs: 200 });
    const before = first.markMs;
    const second = await LocalTimeMark.start({ dataDir, key: 'k', workerId: 1, source: 'file', clock, markAheadMs: 200, maxStartWaitMs: 1000 });
    expect(clock.now()).toBeGreaterThan(before);
    expect(second.markMs).toBeGreaterThan(before);
  });

  it('refuses a bad markAheadMs or maxStartWaitMs as a misconfiguration naming it, before touching the file', async () => {
    const dataDir = dir();
    await expect(LocalTimeMark.start({ dataDir, key: 'k', workerId: 1, source: 'file', markAheadMs: 0 })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      field: 'markAheadMs',
    });
    await expect(LocalTimeMark.start({ dataDir, key: 'k', workerId: 1, source: 'file', maxStartWaitMs: -1 })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      field: 'maxStartWaitMs',
    });
    expect(readLocalMark(localMarkPath(dataDir, 'k'))).toBeNull();
  });

  it('refuses a corrupt file rather than guessing', async () => {
    const dataDir = dir();
    writeFileSync(localMarkPath(dataDir, 'k'), '{"version":1,');
    await expect(LocalTimeMark.start({ dataDir, key: 'k', workerId: 1, source: 'file' })).rejects.toMatchObject({ code: 'WORKER_ID_UNAVAILABLE' });
  });

  it('sanitises keys into safe file names', () => {
    expect(localMarkPath('/d', 'zk-10.0.0.1:8080')).toBe(join('/d', 'worker-id.zk-10.0.0.1_8080.json'));
    expect(localMarkPath('/d', '../x')).toBe(join('/d', 'worker-id..._x.json'));
  });
});

describe('FileWorkerIdProvider', () => {
  it('writes the initial id once, then keeps the file id', async () => {
    const dataDir = dir();
    const clock = steppedClock();
    const a = await new FileWorkerIdProvider({ dataDir, workerId: 5, clock, markAheadMs: 50 }).acquire({ maxWorkerId: 1023 });
    expect(a.workerId).toBe(5);
    expect(a.provider).toBe('file');
    await a.close();
    const b = await new FileWorkerIdProvider({ dataDir, workerId: 9, clock, markAheadMs: 50 }).acquire({ maxWorkerId: 1023 });
    expect(b.workerId).toBe(5);
    await b.close();
  });

  it('refuses an id that does not fit the layout', async () => {
    await expect(new FileWorkerIdProvider({ dataDir: dir(), workerId: 4 }).acquire({ maxWorkerId: 3 })).rejects.toMatchObject({
      code: 'WORKER_ID_UNAVAILABLE',
    });
  });

  it('validates options at construction', () => {
    expect(() => new FileWorkerIdProvider({ dataDir: dir(), workerId: -1 })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID', field: 'workerId' }));
    expect(() => new FileWorkerIdProvider({ dataDir: '' })).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID', field: 'dataDir', message: expect.stringMatching(/IDMINT_DATA_DIR/) }),
    );
  });

  it('refuses to start behind the mark left by a previous run', async () => {
    const dataDir = dir();
    const clock = steppedClock();
    const lease = (await new FileWorkerIdProvider({ dataDir, clock }).acquire({ maxWorkerId: 1023 })) as WorkerIdLease;
    lease.assertIssuable(clock.now() + 500);
    await lease.close();
    clock.offset = -3000;
    await expect(new FileWorkerIdProvider({ dataDir, clock }).acquire({ maxWorkerId: 1023 })).rejects.toBeInstanceOf(ClockBackwardsError);
  });
});

describe('StaticWorkerIdProvider', () => {
  it('hands out the configured id, range-checked', async () => {
    const lease = await new StaticWorkerIdProvider(3).acquire({ maxWorkerId: 3 });
    expect(lease.workerId).toBe(3);
    expect(lease.provider).toBe('static');
    await expect(new StaticWorkerIdProvider(4).acquire({ maxWorkerId: 3 })).rejects.toMatchObject({ code: 'WORKER_ID_UNAVAILABLE' });
    expect(() => new StaticWorkerIdProvider(1.5)).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID', field: 'workerId', message: expect.stringMatching(/IDMINT_WORKER_ID/) }),
    );
  });

  it('keeps a local mark when given a data dir', async () => {
    const dataDir = dir();
    const lease = await new StaticWorkerIdProvider(2, { dataDir }).acquire({ maxWorkerId: 3 });
    const state = JSON.parse(readFileSync(localMarkPath(dataDir, 'static'), 'utf8')) as { workerId: number; source: string };
    expect(state).toMatchObject({ workerId: 2, source: 'static' });
    await lease.close();
    expect(() => lease.assertIssuable(Date.now())).toThrow(IdmintError);
  });
});
