import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { freshStore, REDIS_URL, sleep, uid, type TestStore } from './helpers.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

function startWorker(env: NodeJS.ProcessEnv) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'workers/refill.ts'], { cwd: ROOT, env: { ...process.env, LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited, output: () => out };
}

describe('workers/refill.ts as a process', () => {
  let store: TestStore | undefined;
  afterEach(async () => {
    await store?.close();
    store = undefined;
  });

  it('starts, then stops cleanly on SIGTERM with exit code 0', async () => {
    store = await freshStore();
    const w = startWorker({ REDIS_URL, DATABASE_URL: store.url, IDMINT_REFILL_QUEUE: `proc-${uid()}`, IDMINT_REFILL_EVERY_MS: '600000' });
    try {
      for (let i = 0; i < 600 && !w.output().includes('refill worker ready'); i++) await sleep(50);
      expect(w.output()).toContain('refill worker ready');
      w.child.kill('SIGTERM');
      expect(await w.exited).toBe(0);
      expect(w.output()).toContain('stopping refill worker');
    } finally {
      if (w.child.exitCode === null) w.child.kill('SIGKILL');
    }
  });

  it('refuses to start without DATABASE_URL, with one line that says why', async () => {
    const w = startWorker({ REDIS_URL, DATABASE_URL: '' });
    expect(await w.exited).toBe(1);
    expect(w.output().trim()).toBe('idmint-refill: BAD_REQUEST: workers/refill needs DATABASE_URL (segments come from Postgres)');
  });

  it('refuses a bad refill option, naming the variable', async () => {
    const w = startWorker({ REDIS_URL, DATABASE_URL: 'postgres://127.0.0.1:1/x', IDMINT_REFILL_LOCK_MS: 'soon' });
    expect(await w.exited).toBe(1);
    expect(w.output()).toContain('IDMINT_REFILL_LOCK_MS');
  });
});
