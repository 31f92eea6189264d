import { describe, expect, it } from 'vitest';
import { FORGET_MS, forgotten, processLabel, processName, processRows, STOPPED_KEEP_MS, type LiveProcess } from '../../../src/dashboard/processes.js';
import type { ProcessReport } from '../../../src/dashboard/store.js';

const SAMPLE_MS = 1000;
const NOW = 1_800_000_000_000;

function report(id: string, fields: Partial<ProcessReport> = {}): ProcessReport {
  return {
    id,
    host: 'vm',
    pid: Number(id.split(':')[1] ?? 1),
    roles: ['api'],
    version: 't',
    startedAt: NOW - 60_000,
    at: NOW,
    status: 'ready',
    checks: {},
    issued: {},
    ...fields,
  };
}

const self = report('vm:1', { address: '10.0.0.5:8080', roles: ['api', 'refill'] });
const rows = (reports: ProcessReport[], extra: { heard?: boolean; live?: LiveProcess[] } = {}) =>
  processRows({ reports, self, now: NOW, sampleMs: SAMPLE_MS, heard: extra.heard ?? true, live: extra.live });
const states = (list: ReturnType<typeof rows>) => Object.fromEntries(list.map((r) => [r.id, r.state]));

describe('process naming', () => {
  it('names a process by its advertised host:port, with its roles; a report of before by host:pid', () => {
    expect(processName({ address: '10.0.0.5:8081', host: 'vm', pid: 42 })).toBe('10.0.0.5:8081');
    expect(processName({ host: 'vm', pid: 42 })).toBe('vm:42');
    expect(processLabel({ name: '10.0.0.5:8081', roles: ['api', 'refill'] })).toBe('10.0.0.5:8081 (api, refill)');
    // Two APIs on one machine are told apart by their ports.
    const two = rows([report('vm:2', { address: '10.0.0.5:8081' }), report('vm:3', { address: '10.0.0.5:8082' })]);
    expect(two.map((r) => r.name)).toEqual(['10.0.0.5:8080', '10.0.0.5:8081', '10.0.0.5:8082']);
  });
});

describe('process states', () => {
  it('puts this process first, then by name; a fresh report has its readiness, an old one is silent', () => {
    const list = rows([report('vm:3', { address: 'b:1', status: 'degraded' }), report('vm:2', { address: 'a:1', at: NOW - 3 * SAMPLE_MS - 1 })]);
    expect(list.map((r) => r.id)).toEqual(['vm:1', 'vm:2', 'vm:3']);
    expect(list[0]!.self).toBe(true);
    expect(states(list)).toEqual({ 'vm:1': 'ready', 'vm:2': 'silent', 'vm:3': 'degraded' });
    expect(list[1]!.silent).toBe(true);
  });

  it('shows a process that stopped cleanly as stopped (not silent), and forgets it after STOPPED_KEEP_MS', () => {
    const stopped = report('vm:2', { address: 'a:1', at: NOW - 60_000, stoppedAt: NOW - 60_000 });
    expect(states(rows([stopped]))['vm:2']).toBe('stopped');
    const old = { ...stopped, at: NOW - STOPPED_KEEP_MS - 1, stoppedAt: NOW - STOPPED_KEEP_MS - 1 };
    expect(rows([old]).map((r) => r.id)).toEqual(['vm:1']);
    expect(forgotten(old, NOW)).toBe(true);
    expect(forgotten(stopped, NOW)).toBe(false);
  });

  it('forgets a silent process after FORGET_MS', () => {
    const silent = report('vm:2', { at: NOW - FORGET_MS - 1 });
    expect(rows([silent]).map((r) => r.id)).toEqual(['vm:1']);
    expect(forgotten(silent, NOW)).toBe(true);
    expect(forgotten({ at: NOW - FORGET_MS + 1 }, NOW)).toBe(false);
  });

  it('shows a killed process whose address a newer process holds as stopped (it was restarted)', () => {
    const killed = report('vm:2', { address: '10.0.0.5:8081', at: NOW - 30_000, startedAt: NOW - 600_000 });
    const successor = report('vm:9', { address: '10.0.0.5:8081', startedAt: NOW - 20_000 });
    const list = rows([killed, successor]);
    expect(states(list)).toEqual({ 'vm:1': 'ready', 'vm:2': 'stopped', 'vm:9': 'ready' });
    expect(list.find((r) => r.id === 'vm:2')!.note).toMatch(/replaced by the process started/);
    // Without a successor it stays silent.
    expect(states(rows([killed]))['vm:2']).toBe('silent');
  });

  it('while Redis cannot be read: a process Postgres saw lately is unheard (not silent), one it did not is silent, and one Postgres alone knows is listed', () => {
    const a = report('vm:2', { address: 'a:1', at: NOW - 60_000 });
    const b = report('vm:3', { address: 'b:1', at: NOW - 60_000 });
    const live: LiveProcess[] = [
      { id: 'vm:2:abcd1234', address: 'a:1', roles: 'api', seenAt: new Date(NOW - 2000) },
      { id: 'vm:7:ffff0000', address: 'c:1', roles: 'refill', seenAt: NOW - 1000 },
      // This process's own row is not listed twice.
      { id: 'vm:1:00000000', address: '10.0.0.5:8080', roles: 'api,refill', seenAt: NOW },
    ];
    const list = rows([a, b], { heard: false, live });
    expect(list.map((r) => [r.id, r.state, r.name])).toEqual([
      ['vm:1', 'ready', '10.0.0.5:8080'],
      ['vm:2', 'unheard', 'a:1'],
      ['vm:3', 'silent', 'b:1'],
      ['vm:7:ffff0000', 'unheard', 'c:1'],
    ]);
    expect(list[1]!.note).toMatch(/Postgres saw it 2 s ago/);
    expect(list[3]!.roles).toEqual(['refill']);
    // Neither Redis nor Postgres: the others are unheard, never called silent on no evidence.
    expect(states(rows([a, b], { heard: false }))).toEqual({ 'vm:1': 'ready', 'vm:2': 'unheard', 'vm:3': 'unheard' });
  });
});
