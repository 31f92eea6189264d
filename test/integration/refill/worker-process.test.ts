import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { SWEEP_SCHEDULER_ID } from '../../../src/refill/queue.js';
import { freshStore, type TestStore } from '../../support/store.js';
import { uid } from '../../support/names.js';
import { until, untilValue } from '../../support/poll.js';
import { env } from '../../support/env.js';

const DATABASE_URL = env('DATABASE_URL');
const REDIS_URL = env('REDIS_URL');
import { freePort } from '../../support/spawn.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

async function startWorker(env: NodeJS.ProcessEnv) {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'workers/refill.ts'], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'info', IDMINT_PORT: String(port), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited, output: () => out, url: `http://127.0.0.1:${port}` };
}

describe('workers/refill.ts as a process', () => {
  let store: TestStore | undefined;
  afterEach(async () => {
    await store?.close();
    store = undefined;
  });

  it('re-asserts the sweep scheduler after Redis lost it', async () => {
    store = await freshStore();
    const queueName = `resched-${uid()}`;
    const w = await startWorker({ REDIS_URL, DATABASE_URL: store.url, IDMINT_REFILL_QUEUE: queueName, IDMINT_REFILL_EVERY_MS: '1000' });
    const queue = new Queue(queueName, { connection: { url: REDIS_URL } });
    try {
      await until('the refill worker', () => w.output().includes('refill worker ready'), { detail: w.output });
      expect(await queue.getJobScheduler(SWEEP_SCHEDULER_ID)).toBeTruthy();
      // What FLUSHALL or a restart without persistence does to this queue's scheduler.
      await queue.removeJobScheduler(SWEEP_SCHEDULER_ID);
      expect(await queue.getJobScheduler(SWEEP_SCHEDULER_ID)).toBeFalsy();
      await until('the sweep scheduler re-asserted', async () => Boolean(await queue.getJobScheduler(SWEEP_SCHEDULER_ID)), { detail: w.output });
    } finally {
      await queue.obliterate({ force: true }).catch(() => undefined);
      await queue.close();
      w.child.kill('SIGKILL');
      await w.exited;
    }
  });

  it('starts, then stops cleanly on SIGTERM with exit code 0', async () => {
    store = await freshStore();
    const w = await startWorker({ REDIS_URL, DATABASE_URL: store.url, IDMINT_REFILL_QUEUE: `proc-${uid()}`, IDMINT_REFILL_EVERY_MS: '600000' });
    try {
      await until('the refill worker', () => w.output().includes('refill worker ready'), { detail: w.output });
      // One assembly with idmint serve: ops routes, and no dispenser or worker id it would never use.
      const ready = (await (await fetch(`${w.url}/readyz`)).json()) as { status: string; checks: Record<string, unknown> };
      expect(ready.status).toBe('ready');
      // The refill worker allocates segments, so it claims them in the fence when ZooKeeper is set.
      const fence = process.env.ZK_CONNECT ? ['segment-fence'] : [];
      expect(Object.keys(ready.checks).sort()).toEqual(['database', 'redis', 'refill', ...fence]);
      expect(await (await fetch(`${w.url}/metrics`)).text()).toContain('idmint_');
      expect(w.output()).not.toMatch(/worker id/);
      w.child.kill('SIGTERM');
      expect(await w.exited).toBe(0);
      expect(w.output()).toContain('shutting down');
    } finally {
      if (w.child.exitCode === null) w.child.kill('SIGKILL');
    }
  });

  // Regression: the worker once opened Postgres without IDMINT_PG_SCHEMA, so with the variable set it
  // allocated in another schema than the API (finding none of its tags, or repeating their IDs).
  it('allocates in IDMINT_PG_SCHEMA, the schema the API uses, when DATABASE_URL names none', async () => {
    store = await freshStore();
    await store.store.createBiz({ bizTag: 'schema-drift', pool: 'redis-list', step: 1000 });
    const w = await startWorker({
      REDIS_URL,
      DATABASE_URL,
      IDMINT_PG_SCHEMA: store.schema,
      IDMINT_POOL_KEY_PREFIX: `drift-${uid()}:`,
      IDMINT_REFILL_QUEUE: `drift-${uid()}`,
      IDMINT_REFILL_EVERY_MS: '1000',
    });
    try {
      const ledger = await untilValue(
        'a segment allocated in the schema',
        () => store!.ledger('schema-drift'),
        (l) => l.length > 0,
        { detail: w.output },
      );
      expect(ledger.length).toBeGreaterThan(0);
    } finally {
      w.child.kill('SIGKILL');
      await w.exited;
    }
  });

  it('refuses to start without DATABASE_URL, with one line that says why', async () => {
    const w = await startWorker({ REDIS_URL, DATABASE_URL: '' });
    expect(await w.exited).toBe(1);
    expect(w.output().trim()).toBe(
      'idmint-refill: CONFIG_INVALID: a refill-only process needs DATABASE_URL: it allocates segments in the Postgres the API uses',
    );
  });

  it('refuses a bad refill option, naming the variable', async () => {
    const w = await startWorker({ REDIS_URL, DATABASE_URL: 'postgres://127.0.0.1:1/x', IDMINT_REFILL_LOCK_MS: 'soon' });
    expect(await w.exited).toBe(1);
    expect(w.output()).toContain('IDMINT_REFILL_LOCK_MS');
  });
});
