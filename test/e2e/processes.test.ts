import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';
import { expectNoDuplicates } from '../support/unique.js';
import { sleep, until, untilValue } from '../support/poll.js';

/**
 * IDMINT_PROCESSES: n serving processes on one port, on a shared Postgres with ZooKeeper worker
 * ids. 500,000 IDs over HTTP (a segment and a Snowflake tag) while one process is SIGKILLed
 * and replaced: zero duplicates, one distinct worker id per process (the replacement keeps
 * the dead process's identity, so the group never uses more than n).
 */

let server: SpawnedServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

/** The primary's serving processes: its children, less esbuild's service (run from the sources, tsx starts one). */
const children = (pid: number): number[] =>
  execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .filter(Boolean)
    .map(Number)
    .filter((child) => {
      try {
        return !readFileSync(`/proc/${child}/cmdline`, 'utf8').includes('esbuild');
      } catch {
        return false; // exited meanwhile
      }
    });

describe.each([2, 4])('IDMINT_PROCESSES=%i on one port', (processes) => {
  it('hands out 500,000 IDs with one process SIGKILLed and replaced: zero duplicates, distinct worker ids', async () => {
    const schema = `procs_${processes}_${process.pid}`;
    server = await spawnServer({
      DATABASE_URL: process.env.DATABASE_URL!,
      ZK_CONNECT: process.env.ZK_CONNECT!,
      IDMINT_PG_SCHEMA: schema,
      IDMINT_PROCESSES: String(processes),
      IDMINT_DATA_DIR: mkdtempSync(join(tmpdir(), 'idmint-procs-')),
      IDMINT_TAG_CACHE_MS: '100',
      // Each run its own ZooKeeper identities: the port is fresh, the address says which process.
    });
    const s = server;
    const opts = { intervalMs: 100, detail: () => s.output() };
    await until(`all ${processes} processes`, () => s.output().includes(`all ${processes} processes serve`), opts);
    for (const [bizTag, mode] of [
      ['procs-seg', 'segment'],
      ['procs-snow', 'snowflake'],
      ['procs-metrics', 'segment'],
    ] as const) {
      const created = await fetch(`${s.url}/v1/biz`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ bizTag, mode, step: 2000 }),
      });
      expect(created.status).toBe(201);
    }
    // Every process sees the new tags once its cached miss expires (IDMINT_TAG_CACHE_MS): ask over fresh connections.
    // (Decode with ?bizTag= looks the tag up without handing out an ID: the metrics check below counts every one.)
    for (const bizTag of ['procs-seg', 'procs-snow', 'procs-metrics']) {
      let served = 0;
      await until(
        `every process to know ${bizTag}`,
        async () => {
          const ok = (await fetch(`${s.url}/v1/decode/1?bizTag=${bizTag}`, { headers: { connection: 'close' } })).status !== 404;
          served = ok ? served + 1 : 0;
          return served >= 4 * processes;
        },
        opts,
      );
    }

    const primary = s.child.pid!;
    const ids: Record<'procs-seg' | 'procs-snow', string[]> = { 'procs-seg': [], 'procs-snow': [] };
    let failed = 0;
    const target = 250_000; // per tag
    let taken = 0;
    const take = async (bizTag: 'procs-seg' | 'procs-snow'): Promise<void> => {
      while (ids[bizTag].length < target) {
        try {
          // A fresh connection each time: the primary hands connections round-robin, so every process serves.
          // A client timeout, as any client should have: a connection the primary accepted and was
          // handing to the process at the moment it was SIGKILLed is never answered (node's cluster).
          const response = await fetch(`${s.url}/v1/ids/${bizTag}?count=500`, { headers: { connection: 'close' }, signal: AbortSignal.timeout(5000) });
          if (response.status !== 200) {
            failed++;
            continue;
          }
          const body = (await response.json()) as { ids: string[] };
          ids[bizTag].push(...body.ids);
          taken += body.ids.length;
        } catch {
          failed++; // the SIGKILLed process's connections reset; nothing was handed out on them
          await sleep(20);
        }
      }
    };
    const killer = (async () => {
      await until('a quarter of the run', () => taken >= 125_000, opts);
      const victim = children(primary)[0]!;
      process.kill(victim, 'SIGKILL');
      await until('the replacement', () => s.output().includes('starting its replacement'), opts);
      await until(`${processes} processes again`, () => children(primary).length === processes && !children(primary).includes(victim), opts);
    })();
    await Promise.all([...Array.from({ length: 8 }, (_, i) => take(i % 2 === 0 ? 'procs-seg' : 'procs-snow')), killer]);

    const all = [...ids['procs-seg'], ...ids['procs-snow']];
    expect(all.length).toBeGreaterThanOrEqual(500_000);
    expectNoDuplicates(all);
    // Leaf's layout: 41 time | 10 worker | 12 sequence.
    const workers = new Set(ids['procs-snow'].map((id) => Number((BigInt(id) >> 12n) & 0x3ffn)));
    expect(workers.size, `worker ids ${[...workers].join(',')}`).toBe(processes);
    expect(failed).toBeLessThan(1000);
    expect(s.output()).not.toMatch(/process failed to start/);

    // /metrics on any process is the group's: 400 IDs over fresh connections (so over every
    // process) are 400 in every scrape, whichever process answers it.
    for (let i = 0; i < 40; i++) expect((await fetch(`${s.url}/v1/ids/procs-metrics?count=10`, { headers: { connection: 'close' } })).status).toBe(200);
    for (let scrape = 0; scrape < 4; scrape++) {
      const text = await (await fetch(`${s.url}/metrics`, { headers: { connection: 'close' } })).text();
      const issued = [...text.matchAll(/^idmint_ids_issued_total\{biz_tag="procs-metrics",[^}]*\} (\d+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
      expect(issued).toBe(400);
    }
  });
});

describe('IDMINT_PROCESSES=2: a replacement that dies while it starts', () => {
  it('is started again after a pause; the other process serves throughout and the group never stops (issue 42)', async () => {
    server = await spawnServer({
      DATABASE_URL: process.env.DATABASE_URL!,
      ZK_CONNECT: process.env.ZK_CONNECT!,
      IDMINT_PG_SCHEMA: `procs_restart_${process.pid}`,
      IDMINT_PROCESSES: '2',
      IDMINT_DATA_DIR: mkdtempSync(join(tmpdir(), 'idmint-procs-')),
    });
    const s = server;
    const opts = { intervalMs: 50, detail: () => s.output() };
    const allServe = (): number => s.output().split('all 2 processes serve').length - 1;
    await until('both processes', () => allServe() === 1, opts);
    const primary = s.child.pid!;
    const first = children(primary);
    process.kill(first[0]!, 'SIGKILL');
    // Its replacement, killed as soon as it exists: long before it can listen (loading alone takes longer).
    const replacement = await untilValue(
      'the replacement process',
      () => children(primary).find((pid) => !first.includes(pid)),
      (pid) => pid !== undefined,
      { intervalMs: 5, detail: () => `children ${children(primary).join(',')} (first ${first.join(',')})\n${s.output()}` },
    );
    process.kill(replacement!, 'SIGKILL');
    await until('the replacement to be started again', () => s.output().includes('a replacement died before serving'), opts);
    // Meanwhile and after, the port answers: the healthy process was never stopped.
    for (let i = 0; i < 10; i++) expect((await fetch(`${s.url}/healthz`, { headers: { connection: 'close' } })).status).toBe(200);
    await until('both processes serving again', () => allServe() === 2, { ...opts, timeoutMs: 60_000 });
    expect(children(primary)).toHaveLength(2);
    expect(s.output()).not.toMatch(/stopping the group/);
    expect(await s.stop()).toBe(0);
  });
});
