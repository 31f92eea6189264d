import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FORWARD_WAIT_MS, isNpmCommandLine, REPEAT_WINDOW_MS, startedByNpm, stopOnSignals } from '../../../src/app/signals.js';

// stopOnSignals listens on the process itself: each test adds its handler, emits signals to it
// and takes it off again; process.exit is stubbed and the close never ends (the deadline timer
// is fake, so nothing exits for real).
describe('stopOnSignals', () => {
  let before: { SIGINT: NodeJS.SignalsListener[]; SIGTERM: NodeJS.SignalsListener[] };
  let exit: ReturnType<typeof vi.spyOn>;
  let clock = 0;

  beforeEach(() => {
    vi.useFakeTimers();
    before = { SIGINT: process.listeners('SIGINT'), SIGTERM: process.listeners('SIGTERM') };
    exit = vi.spyOn(process, 'exit').mockImplementation((() => undefined) as never);
    clock = 0;
  });

  afterEach(() => {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      for (const l of process.listeners(signal)) if (!before[signal].includes(l)) process.off(signal, l);
    }
    exit.mockRestore();
    vi.useRealTimers();
  });

  const start = (underNpm: boolean, close: () => Promise<void> = () => new Promise<void>(() => undefined)): void =>
    stopOnSignals(pino({ level: 'silent' }), close, () => clock, underNpm);
  // Lets the close's promise and the logger's flush callback run (fake timers do not hold them).
  const settle = async (): Promise<void> => {
    for (let i = 0; i < 5; i++) await vi.advanceTimersByTimeAsync(0);
  };

  it('a repeat within the window is the same request; one after it exits at once with 130', () => {
    start(false);
    process.emit('SIGTERM', 'SIGTERM');
    clock += REPEAT_WINDOW_MS / 2;
    process.emit('SIGTERM', 'SIGTERM');
    expect(exit).not.toHaveBeenCalled();
    clock += REPEAT_WINDOW_MS;
    process.emit('SIGTERM', 'SIGTERM');
    expect(exit).toHaveBeenCalledWith(130);
  });

  it("under npm, npm's forward is not a second Ctrl-C however late it comes; the user's second one is", () => {
    start(true);
    process.emit('SIGTERM', 'SIGTERM');
    clock += 5 * REPEAT_WINDOW_MS;
    process.emit('SIGTERM', 'SIGTERM');
    expect(exit).not.toHaveBeenCalled();
    clock += 5 * REPEAT_WINDOW_MS;
    process.emit('SIGTERM', 'SIGTERM');
    expect(exit).toHaveBeenCalledWith(130);
  });

  it("under npm, a stopped server exits 0 once npm's forward has arrived, not before it", async () => {
    start(true, async () => undefined);
    process.emit('SIGINT', 'SIGINT');
    await settle();
    await vi.advanceTimersByTimeAsync(FORWARD_WAIT_MS / 2);
    expect(exit).not.toHaveBeenCalled();
    process.emit('SIGINT', 'SIGINT');
    await settle();
    expect(exit).toHaveBeenCalledWith(0);
  });

  it('under npm, a server signalled alone exits 0 after the forward wait', async () => {
    start(true, async () => undefined);
    process.emit('SIGTERM', 'SIGTERM');
    await settle();
    expect(exit).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(FORWARD_WAIT_MS);
    await settle();
    expect(exit).toHaveBeenCalledWith(0);
  });

  it('outside npm, a stopped server exits 0 at once', async () => {
    start(false, async () => undefined);
    process.emit('SIGTERM', 'SIGTERM');
    await settle();
    expect(exit).toHaveBeenCalledWith(0);
  });

  it('a close that outlives the deadline exits with 1', () => {
    start(false);
    process.emit('SIGTERM', 'SIGTERM');
    vi.advanceTimersByTime(10_001);
    expect(exit).toHaveBeenCalledWith(1);
  });
});

describe('startedByNpm', () => {
  it("recognises npm's command lines and nothing else", () => {
    expect(isNpmCommandLine('npm start\0\0\0')).toBe(true);
    expect(isNpmCommandLine('node\0/usr/bin/npm\0start\0')).toBe(true);
    expect(isNpmCommandLine('node\0/usr/lib/node_modules/npm/bin/npm-cli.js\0start\0')).toBe(true);
    expect(isNpmCommandLine('node\0/work/node_modules/vitest/vitest.mjs\0run\0')).toBe(false);
    expect(isNpmCommandLine('node\0bin/idmint.js\0serve\0')).toBe(false);
    expect(isNpmCommandLine('npmx\0')).toBe(false);
  });

  it('needs npm_lifecycle_event and an npm parent: a process a npm test run spawns inherits the variable only', () => {
    expect(startedByNpm({}, process.ppid)).toBe(false);
    expect(startedByNpm({ npm_lifecycle_event: 'test' }, process.pid)).toBe(false);
  });
});
