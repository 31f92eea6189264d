import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { expect, it, onTestFinished } from 'vitest';
import { CLOSE_DEADLINE_MS } from '../../../src/app/signals.js';
import { untilValue } from '../../support/poll.js';

// runProcess (src/app/process.ts) through real processes and real signals: forked fixtures, so
// the integration tier, where a loaded machine's slow start does not fail a 5-s unit timeout.

/** Every fixture started here, so the last test can check none outlived its test. */
const started: ChildProcess[] = [];
const alive = (child: ChildProcess): boolean => child.exitCode === null && child.signalCode === null;

/** Starts a fixture; the test that started it kills it when it finishes, however it finishes. */
function runFixture(name: string): { child: ChildProcess; output: () => string; exited: Promise<[number | null, NodeJS.Signals | null]> } {
  const file = fileURLToPath(new URL(`./fixtures/${name}.ts`, import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', file], { env: { ...process.env, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
  started.push(child);
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  onTestFinished(async () => {
    if (!alive(child)) return;
    child.kill('SIGKILL');
    await exited;
  });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  return { child, output: () => output, exited };
}

const untilListening = (output: () => string): Promise<string> =>
  untilValue(
    'the fixture to say it listens',
    async () => output(),
    (o) => o.includes('"listening"'),
    { timeoutMs: 30_000, detail: output },
  );

// A Ctrl-C between "listening" and the end of the start found SIGINT's default action: the
// process was killed (exit 130 under npm start, in CI) instead of stopping.
it('a signal during the start stops the process once it has started, and it exits 0', async () => {
  const { child, output, exited } = runFixture('slow-start');
  await untilListening(output);
  child.kill('SIGINT');
  const [code, signal] = await exited;
  expect({ code, signal }, output()).toEqual({ code: 0, signal: null });
  const order = ['shutting down', 'started', 'closed', 'stopped cleanly'].map((line) => output().indexOf(`"${line}"`));
  expect(
    order.every((at, i) => at >= 0 && (i === 0 || at > order[i - 1]!)),
    output(),
  ).toBe(true);
});

// An orchestrator's SIGTERM during a start hung on a server that never answers: the process must
// still stop (issue 42: a fixture left by a timed-out test ran for two hours).
it(
  'a SIGTERM during a start that never finishes stops the process at the close deadline, exit 1, saying why',
  async () => {
    const { child, output, exited } = runFixture('never-starts');
    await untilListening(output);
    child.kill('SIGTERM');
    const [code, signal] = await exited;
    expect({ code, signal }, output()).toEqual({ code: 1, signal: null });
    expect(output()).toContain('stop asked for during the start');
    expect(output()).toContain(`shutdown took over ${CLOSE_DEADLINE_MS} ms`);
    expect(output()).not.toContain('"closed"');
  },
  4 * CLOSE_DEADLINE_MS,
);

// A CI run saw "started" after "stopped cleanly": the logger's lines written just before an exit
// must all come out, in order.
it('a process that exits right after logging writes every line, in order', async () => {
  const { output, exited } = runFixture('log-then-exit');
  expect((await exited)[0], output()).toBe(0);
  const messages = [...output().matchAll(/"msg":"([^"]*)"/g)].map((m) => m[1]);
  expect(messages).toEqual(['long line', 'last line']);
});

it('no fixture outlives the test that started it', async () => {
  expect(started.length).toBeGreaterThan(0);
  expect(started.filter(alive).map((c) => c.pid)).toEqual([]);
});
