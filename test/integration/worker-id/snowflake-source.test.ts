import { execFile, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ClockBackwardsError } from '../../../src/core/errors.js';
import { LEAF_LAYOUT } from '../../../src/core/layout.js';
import type { BizTag } from '../../../src/core/ports.js';
import { createSnowflakeSource, type SnowflakeSource } from '../../../src/dispenser/sources/snowflake.js';
import type { ZooKeeperRegistry } from '../../../src/worker-id/index.js';
import { ZooKeeperWorkerIdProvider, type ZooKeeperWorkerIdLease } from '../../../src/worker-id/index.js';
import { capturingLogger, expireSessionBehindProxy, startProxy, steppedClock, tempDir, zkRoots } from './helpers.js';
import { env } from '../../support/env.js';
import { until } from '../../support/poll.js';
import { freePort } from '../../support/ports.js';
import { expectNoDuplicates } from '../../support/unique.js';
import { sleep } from '../../support/poll.js';

const run = promisify(execFile);
const fixture = fileURLToPath(new URL('./fixtures/snowflake-issue.ts', import.meta.url));
const tag = { bizTag: 'order', mode: 'snowflake' } as BizTag;
const roots = zkRoots();
const newRoot = (): string => roots.next();
const sources: SnowflakeSource[] = [];

async function start(
  root: string,
  address: string,
  more: Partial<ConstructorParameters<typeof ZooKeeperWorkerIdProvider>[0]> & { dataDir: string },
): Promise<SnowflakeSource> {
  const clock = more.clock;
  const provider = new ZooKeeperWorkerIdProvider({ connect: env('ZK_CONNECT'), address, root, ...more });
  const source = await createSnowflakeSource({ provider, ...(clock ? { clock } : {}) });
  sources.push(source);
  return source;
}

/** Issues batches until `ms` of wall time passed, yielding between batches; returns every ID. With `pauses`, a refusal (the lease paused) is waited out. */
async function issueFor(source: SnowflakeSource, ms: number, pauses = false): Promise<string[]> {
  const out: string[] = [];
  const until = Date.now() + ms;
  while (Date.now() < until) {
    try {
      for (const id of await source.take(tag, 50)) out.push(id);
    } catch (err) {
      if (!pauses || !['NOT_READY', 'CLOCK_BACKWARDS'].includes((err as { code?: string }).code ?? '')) throw err;
      await new Promise((r) => setTimeout(r, 10));
    }
    await new Promise((r) => setImmediate(r));
  }
  return out;
}

afterEach(async () => {
  await Promise.all(sources.splice(0).map((s) => s.close()));
});

afterAll(() => roots.removeAll());

describe('SnowflakeSource over ZooKeeper worker ids', () => {
  it('several sources, in this process and in two child processes, issue concurrently with zero duplicates', async () => {
    const root = newRoot();
    const local = await Promise.all([1, 2, 3].map((i) => start(root, `10.5.0.${i}:8080`, { dataDir: tempDir() })));
    const distinct = local.map((s) => s.workerId);
    expectNoDuplicates(distinct, 'worker ids');
    expect(distinct).toHaveLength(3);
    const children = [4, 5].map((i) =>
      run(process.execPath, ['--import', 'tsx', fixture, env('ZK_CONNECT'), `10.5.0.${i}:8080`, root, tempDir(), '30000'], {
        maxBuffer: 64 << 20,
        timeout: 60_000,
      }),
    );
    const [mine, ...theirs] = await Promise.all([Promise.all(local.map((s) => issueFor(s, 1500))), ...children]);
    const all = [...mine.flat(), ...theirs.flatMap((r) => r.stdout.trim().split('\n'))];
    expect(all.length).toBeGreaterThan(60_000);
    expectNoDuplicates(all);
    // Five holders; a child that starts after the other closed may take its id again, above its mark.
    const workers = new Set(all.map((id) => local[0]!.decode(BigInt(id)).worker));
    expect(workers.size).toBeGreaterThanOrEqual(4);
  });

  it('a restart with the clock stepped back 2 s refuses; by less than the mark margin it waits and repeats nothing', async () => {
    const root = newRoot();
    const dataDir = tempDir();
    const clock = steppedClock();
    const first = await start(root, '10.6.0.1:8080', { dataDir, clock });
    let ids = await issueFor(first, 400);
    await first.close();

    clock.offset = -2000;
    await expect(start(root, '10.6.0.1:8080', { dataDir, clock })).rejects.toBeInstanceOf(ClockBackwardsError);

    clock.offset = -300;
    const second = await start(root, '10.6.0.1:8080', { dataDir, clock });
    expect(second.workerId).toBe(first.workerId);
    ids = ids.concat(await issueFor(second, 400));
    expectNoDuplicates(ids);
  });

  it('ZooKeeper down at restart: starts on the cached id, serves once ZooKeeper leases it again, and repeats nothing', async () => {
    const root = newRoot();
    const dataDir = tempDir();
    const first = await start(root, '10.7.0.1:8080', { dataDir });
    let ids = await issueFor(first, 200);
    await first.close();
    const port = await freePort();
    const second = await start(root, '10.7.0.1:8080', { dataDir, connect: `127.0.0.1:${port}`, connectTimeoutMs: 300, retryEveryMs: 100 });
    expect(second.workerId).toBe(first.workerId);
    await expect(second.take(tag, 1)).rejects.toMatchObject({ code: 'NOT_READY' });
    const proxy = await startProxy(port, env('ZK_CONNECT'));
    try {
      await until('the cached id to be leased again', () => (second.lease as ZooKeeperWorkerIdLease).registered);
      ids = ids.concat(await issueFor(second, 200, true));
      expectNoDuplicates(ids);
    } finally {
      await second.close();
      await proxy.close();
    }
  });

  it('through a ZooKeeper session expiry: stops at once, takes its id again, issues on, zero duplicates', async () => {
    const root = newRoot();
    const { logger, lines } = capturingLogger();
    // Through a proxy the test cuts: the session is closed while the client cannot reconnect.
    const port = await freePort();
    let proxy = await startProxy(port, env('ZK_CONNECT'));
    try {
      const source = await start(root, '10.8.0.1:8080', { dataDir: tempDir(), logger, retryEveryMs: 100, connect: `127.0.0.1:${port}` });
      const zk = (source.lease as unknown as { o: { registry: ZooKeeperRegistry } }).o.registry.client!;
      const issuing = issueFor(source, 3000, true);
      proxy = await expireSessionBehindProxy(zk, proxy, port, env('ZK_CONNECT'));
      await until('the id to be leased again', () => lines.some((l) => String(l.msg).includes('worker id leased again')));
      const ids = await issuing;
      expect(lines.some((l) => String(l.msg).includes('session expired'))).toBe(true);
      expectNoDuplicates(ids);
      expect(ids.length).toBeGreaterThan(1000);
      expect(new Set(ids.map((id) => local(id).worker)).size).toBe(1);
    } finally {
      await proxy.close();
    }
  });
});

/** Runs the fixture until it has printed for `ms`, then SIGKILLs it; returns the complete lines it printed. */
async function issueUntilKilled(args: string[], ms: number): Promise<string[]> {
  const child = spawn(process.execPath, ['--import', 'tsx', fixture, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    child.stderr.setEncoding('utf8').on('data', (d: string) => d.includes('ready') && resolve());
    child.on('exit', (code) => reject(new Error(`fixture exited early with ${code}`)));
  });
  await sleep(ms); // the fixture issues IDs for this long before it is killed
  child.kill('SIGKILL');
  await exited;
  // A line cut by the kill was never fully handed out.
  return out.split('\n').slice(0, -1);
}

describe('SnowflakeSource across a crash', () => {
  it('a SIGKILLed process restarted with its clock behind its last ID repeats nothing', async () => {
    const root = newRoot();
    const dataDir = tempDir();
    const args = (clock: string) => [env('ZK_CONNECT'), '10.9.0.1:8080', root, dataDir, 'forever', clock];
    const before = await issueUntilKilled(args('0'), 700);
    // The restarted clock reads 300 ms before the last ID handed out, however long the restart took.
    const lastMs = local(before[before.length - 1]!).timestamp;
    const after = await issueUntilKilled(args(`@${lastMs - 300}`), 700);
    expect(before.length).toBeGreaterThan(1000);
    expect(after.length).toBeGreaterThan(1000);
    expect(local(before[0]!).worker).toBe(local(after[0]!).worker);
    expectNoDuplicates(before.concat(after));
  });
});

function local(id: string) {
  return LEAF_LAYOUT.decode(BigInt(id));
}
