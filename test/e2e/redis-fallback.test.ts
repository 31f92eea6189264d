import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';
import { startPrivateServer, type PrivateServer } from '../support/servers.js';
import { expectNoDuplicates } from '../support/unique.js';
import { until } from '../support/poll.js';
import { expectQuietOutage, logLines } from '../support/log-volume.js';

const TOKEN = 'fallback-admin-token';
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

describe('Redis pools with fallback (idmint serve + REDIS_URL)', () => {
  let dataDir: string;
  // A Redis of this test's own, so killing it mid-run disturbs nobody else.
  let redis: PrivateServer;
  let server: SpawnedServer;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-fallback-'));
    redis = await startPrivateServer('redis');
    server = await spawnServer({
      IDMINT_DATA_DIR: dataDir,
      IDMINT_ADMIN_TOKEN: TOKEN,
      REDIS_URL: redis.url,
      IDMINT_REFILL_EVERY_MS: '1000',
      IDMINT_POOL_MIN_DEPTH: '2000',
    });
  });

  afterAll(async () => {
    await server?.stop('SIGKILL');
    await redis?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('keeps serving by fallback while Redis is down and returns to the pool after, with zero duplicates', async () => {
    for (const [bizTag, fallback] of [
      ['pay', 'snowflake'],
      ['refund', 'segment'],
    ] as const) {
      const response = await fetch(`${server.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify({ bizTag, step: 500, fallback }) });
      expect(response.status).toBe(201);
    }

    const ids = new Map<string, string[]>([
      ['pay', []],
      ['refund', []],
    ]);
    const sources = new Map<string, Set<string>>([
      ['pay', new Set()],
      ['refund', new Set()],
    ]);
    const errors: string[] = [];
    let phase: 'up' | 'down' | 'back' = 'up';
    const phaseSources: Record<string, Set<string>> = { up: new Set(), down: new Set(), back: new Set() };
    let running = true;

    const client = async (bizTag: string): Promise<void> => {
      while (running) {
        const response = await fetch(`${server.url}/v1/ids/${bizTag}?count=${1 + Math.floor(Math.random() * 50)}`);
        const body = (await response.json()) as { ids?: string[]; source?: string; error?: { code: string } };
        if (!response.ok || !body.ids) {
          errors.push(`${response.status} ${JSON.stringify(body)}`);
          continue;
        }
        ids.get(bizTag)!.push(...body.ids);
        sources.get(bizTag)!.add(body.source!);
        phaseSources[phase]!.add(`${bizTag}:${body.source}`);
      }
    };
    const clients = Promise.all(Array.from({ length: 16 }, (_, i) => client(i % 2 === 0 ? 'pay' : 'refund')));
    const total = (): number => ids.get('pay')!.length + ids.get('refund')!.length;
    const detail = (): string => {
      const seen = JSON.stringify(Object.fromEntries(Object.entries(phaseSources).map(([k, v]) => [k, [...v]])));
      return `sources so far ${seen}; the server's last output:\n${server.output().slice(-4000)}`;
    };
    // Segments this server took from Postgres (refills and the segment rung alike), both tags.
    const allocations = async (): Promise<number> => {
      const text = await (await fetch(`${server.url}/metrics`)).text();
      return [...text.matchAll(/^idmint_segment_allocations_total\{biz_tag="(?:pay|refund)"\} (\d+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
    };
    const waitFor = (predicate: () => boolean, what: string, timeoutMs = 60_000): Promise<void> => until(what, predicate, { timeoutMs, detail });

    try {
      await waitFor(() => phaseSources.up!.has('pay:pool') && total() > 20_000, 'IDs from the Redis pool');
      const mark = server.output().length;
      const from = Date.now();
      await redis.kill();
      phase = 'down';
      const atDown = total();
      const allocatedAtDown = await allocations();
      // The fallback ladder: with Postgres healthy both tags get segments, even `pay` (fallback snowflake).
      await waitFor(
        () => phaseSources.down!.has('pay:segment') && phaseSources.down!.has('refund:segment') && total() > atDown + 20_000,
        'fallback IDs while Redis is down',
      );
      // The segment rung buffers like Leaf's segment mode: a step (500) per allocation, not one
      // Postgres transaction per request (requests take 1-50 IDs, ~25 on average).
      const servedDown = total() - atDown;
      const allocatedDown = (await allocations()) - allocatedAtDown;
      expect(allocatedDown, `${allocatedDown} allocations for ${servedDown} IDs`).toBeLessThanOrEqual(Math.ceil(servedDown / 500) * 2 + 8);
      const degraded = (await (await fetch(`${server.url}/readyz`)).json()) as { status: string };
      expect(degraded.status).toBe('degraded');

      await redis.start();
      const backAt = Date.now();
      phase = 'back';
      // The refill worker's own reconnect backs off (BullMQ retries its loop every few seconds):
      // on a loaded CI machine running other suites beside this one, give it two minutes.
      await waitFor(
        () => phaseSources.back!.has('pay:pool') && phaseSources.back!.has('refund:pool'),
        'the pool serving again after Redis returns',
        120_000,
      ).catch(async (err: Error) => {
        // What the server knows of its pools and refill queue, first, where a CI summary shows it.
        const stats = await fetch(`${server.url}/v1/stats`, { headers: admin }).then(
          (r) => r.text(),
          (e: Error) => e.message,
        );
        const ready = await fetch(`${server.url}/readyz`).then(
          (r) => r.text(),
          (e: Error) => e.message,
        );
        throw new Error(
          `${err.message.split('\n')[0]}\nstats ${stats.slice(0, 600)}\nreadyz ${ready.slice(0, 600)}\nerrors ${errors.length}: ${errors.slice(-3).join(' | ')}\n${err.message}`,
        );
      });
      const poolAgain = Date.now();
      await until('ready again', async () => ((await (await fetch(`${server.url}/readyz`)).json()) as { status: string }).status === 'ready', {
        timeoutMs: 30_000,
        detail,
      });
      const lines = logLines(server.output(), mark).filter((l) => l.level >= 30 && l.time <= poolAgain);
      console.log(
        `Redis back: the pool served again ${poolAgain - backAt} ms and /readyz said ready ${Date.now() - backAt} ms after it answered; ${lines.length} log lines in ${((poolAgain - from) / 1000).toFixed(1)} s of outage`,
      );
      // Quiet logs (issue 41): at most 10 lines a minute, from the kill to the pool serving again.
      expectQuietOutage(logLines(server.output(), mark), from, poolAgain);
    } finally {
      running = false;
      await clients;
    }

    expect(errors).toEqual([]);
    const pay = ids.get('pay')!;
    const refund = ids.get('refund')!;
    expectNoDuplicates(pay);
    expectNoDuplicates(refund);
    // Postgres served throughout: no Snowflake IDs, only short segment IDs, for either tag.
    expect(phaseSources.down!.has('pay:snowflake')).toBe(false);
    expect(pay.every((id) => BigInt(id) < 1n << 53n)).toBe(true);
    expect(refund.every((id) => BigInt(id) < 1n << 53n)).toBe(true);
    expect(((await (await fetch(`${server.url}/readyz`)).json()) as { status: string }).status).toBe('ready');
  }, 300_000);
});
