import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/app/log.js';
import { IdmintError } from '../../../src/core/errors.js';
import { Circuit } from '../../../src/resilience/circuit.js';
import { until } from '../../support/poll.js';

const outage = (): IdmintError => new IdmintError('NOT_READY', 'connect ECONNREFUSED');
const answer = (): Error => Object.assign(new Error('duplicate key'), { code: '23505' });

/** A stand-in server: up or down, counting the calls that reached it. */
function server() {
  const s = {
    up: true,
    hang: false,
    calls: 0,
    probes: 0,
    call: async (): Promise<string> => {
      s.calls++;
      if (!s.up) throw outage();
      return 'ok';
    },
    probe: async (): Promise<void> => {
      s.probes++;
      if (s.hang) await new Promise(() => undefined);
      if (!s.up) throw outage();
    },
  };
  return s;
}

function logged() {
  const lines: Array<{ level: number; msg: string }> = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString('utf8').split('\n')) if (l.trim()) lines.push(JSON.parse(l) as { level: number; msg: string });
      cb();
    },
  });
  return { logger: createLogger({ level: 'info', destination }), lines };
}

describe('Circuit', () => {
  const circuits: Circuit[] = [];
  const make = (s: ReturnType<typeof server>, logger = logged().logger): Circuit => {
    const c = new Circuit({
      name: 'the test server',
      isOutage: (e) => e instanceof IdmintError && e.code === 'NOT_READY',
      probe: s.probe,
      probeEveryMs: 20,
      logger,
    });
    circuits.push(c);
    return c;
  };
  afterEach(() => circuits.splice(0).forEach((c) => c.shutdown()));

  it('passes calls and answers through while the server answers, errors that are answers included', async () => {
    const s = server();
    const c = make(s);
    expect(await c.run(s.call)).toBe('ok');
    await expect(c.run(() => Promise.reject(answer()))).rejects.toMatchObject({ code: '23505' });
    expect(c.isOpen).toBe(false);
    expect(await c.run(s.call)).toBe('ok');
  });

  it('opens on the first outage: later calls fail at once with NOT_READY and retryAfterMs, never reaching the server', async () => {
    const s = server();
    const c = make(s);
    s.up = false;
    await expect(c.run(s.call)).rejects.toMatchObject({ code: 'NOT_READY' });
    expect(c.isOpen).toBe(true);
    const before = s.calls;
    for (let i = 0; i < 50; i++) {
      const err = await c.run(s.call).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(IdmintError);
      expect(err).toMatchObject({ code: 'NOT_READY', details: { retryAfterMs: 20 } });
      expect((err as Error).message).toContain('the test server is unreachable');
    }
    expect(s.calls).toBe(before);
    expect(c.health()).toMatchObject({ ok: false });
  });

  it('a background probe, never a caller, finds the server back; then calls go through', async () => {
    const s = server();
    const c = make(s);
    s.up = false;
    await c.run(s.call).catch(() => undefined);
    await until('a few probes', () => s.probes >= 3);
    expect(c.isOpen).toBe(true);
    const calls = s.calls;
    s.up = true;
    await until('the circuit to close', () => !c.isOpen);
    expect(s.calls).toBe(calls);
    expect(await c.run(s.call)).toBe('ok');
    expect(c.health()).toEqual({ ok: true });
  });

  it('one probe in flight at a time: a hung server gets one', async () => {
    const s = server();
    const c = make(s);
    s.up = false;
    s.hang = true;
    await c.run(s.call).catch(() => undefined);
    await until('the first probe', () => s.probes === 1);
    await new Promise((r) => setTimeout(r, 200));
    expect(s.probes).toBe(1);
    await expect(c.run(s.call)).rejects.toMatchObject({ code: 'NOT_READY' });
  });

  it('no caller is ever the trial: a stale call failing while a probe hangs re-opens it, and the next period lets no caller through either', async () => {
    const s = server();
    const c = make(s);
    s.up = false;
    s.hang = true;
    // A call already on its way when the server went: it fails late, after the probe started.
    let failLate!: (err: Error) => void;
    const stale = c.run(() => new Promise<never>((_, reject) => (failLate = reject))).catch((e: unknown) => e);
    await c.run(s.call).catch(() => undefined);
    await until('the first probe', () => s.probes === 1);
    failLate(outage());
    await stale;
    await new Promise((r) => setTimeout(r, 100));
    let through = 0;
    for (let i = 0; i < 20; i++) {
      await c.run(async () => ++through).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(through).toBe(0);
    expect(s.probes).toBe(1);
  });

  it('abandonOnOpen: calls already waiting on the server fail at once when it opens', async () => {
    const c = new Circuit({
      name: 'the test server',
      isOutage: (e) => e instanceof IdmintError,
      probe: () => new Promise(() => undefined),
      probeEveryMs: 20,
      abandonOnOpen: true,
    });
    circuits.push(c);
    const waiting = Array.from({ length: 5 }, () => c.run(() => new Promise(() => undefined)).catch((e: unknown) => e));
    await c.run(() => Promise.reject(outage())).catch(() => undefined);
    for (const err of await Promise.all(waiting)) expect(err).toMatchObject({ code: 'NOT_READY', details: { retryAfterMs: 20 } });
  });

  it('trip and reset: a client that knows first (a disconnect, a reconnect) opens and closes it without a failed call', async () => {
    const s = server();
    const c = make(s);
    c.trip('disconnected');
    expect(c.isOpen).toBe(true);
    await expect(c.run(s.call)).rejects.toMatchObject({ code: 'NOT_READY' });
    expect(s.calls).toBe(0);
    c.reset();
    expect(await c.run(s.call)).toBe('ok');
  });

  it('logs one line when lost and one when back, whatever the number of calls between', async () => {
    const s = server();
    const { logger, lines } = logged();
    const c = make(s, logger);
    s.up = false;
    for (let i = 0; i < 100; i++) await c.run(s.call).catch(() => undefined);
    await until('probes', () => s.probes >= 3);
    s.up = true;
    await until('the circuit to close', () => !c.isOpen);
    expect(lines.map((l) => [l.level, l.msg.split(';')[0]])).toEqual([
      [40, 'the test server is unreachable'],
      [30, 'the test server is unreachable'],
    ]);
    expect(lines[1]!.msg).toMatch(/recovered after/);
  });
});
