import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { untilValue } from '../../support/poll.js';

const fixture = fileURLToPath(new URL('./fixtures/slow-start.ts', import.meta.url));

// A Ctrl-C between "listening" and the end of the start found SIGINT's default action: the
// process was killed (exit 130 under npm start, in CI) instead of stopping.
it('a signal during the start stops the process once it has started, and it exits 0', async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', fixture], { env: { ...process.env, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  await untilValue('the fixture to say it listens', async () => output, (o) => o.includes('"listening"'), { timeoutMs: 30_000, detail: () => output });
  child.kill('SIGINT');
  const [code, signal] = await exited;
  expect({ code, signal }, output).toEqual({ code: 0, signal: null });
  const order = ['shutting down', 'started', 'closed', 'stopped cleanly'].map((line) => output.indexOf(`"${line}"`));
  expect(order.every((at, i) => at >= 0 && (i === 0 || at > order[i - 1]!)), output).toBe(true);
});
