/**
 * What tracing costs per request on the hottest path, HTTP `GET /v1/ids/demo?count=1`, in one
 * process: the routes and dispenser of the code before tracing existed (a worktree of the commit
 * before src/tracing, or IDMINT_BENCH_BASELINE=<ref>, imported beside this code) against this
 * code, each a fastify app answering `inject()` over its own in-memory PGlite. Batches alternate
 * between the two many times, so the load of a shared machine hits both alike.
 *   1. no SDK registered: before vs tracing off;
 *   2. an SDK registered (batch processor, in-memory exporter): before vs tracing on.
 * Reproduce: `npm run bench -- tracing` (this and the socket-level tracing-http.bench.ts).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { median, perSecond, table, type Section } from './lib.js';
import type * as Pglite from '../src/store/pglite.js';
import type * as Migrations from '../src/store/migrations.js';
import type * as BizStore from '../src/store/biz-store.js';
import type * as Memory from '../src/dispenser/sources/memory.js';
import type * as DispenserModule from '../src/dispenser/dispenser.js';
import type * as Base from '../src/http/base.js';
import type * as Routes from '../src/http/routes-ids.js';

// Rounds of ~0.2 CPU-seconds: long against the kernel's CPU accounting tick, short enough that a
// burst from a neighbour lands on one round of one app, which the per-round pairing sees past.
const ROUNDS = 60;
const BATCHES = 40;
const CONCURRENCY = 32;
const here = fileURLToPath(new URL('..', import.meta.url));

function git(args: string[]): string {
  return execFileSync('git', args, { cwd: here, encoding: 'utf8' }).trim();
}

function baselineRef(): string {
  if (process.env.IDMINT_BENCH_BASELINE) return process.env.IDMINT_BENCH_BASELINE;
  const added = git(['log', '--diff-filter=A', '--format=%H', '--', 'src/tracing/tracer.ts']).split('\n').pop();
  if (!added) throw new Error('no commit adds src/tracing/tracer.ts: set IDMINT_BENCH_BASELINE to the ref to compare with');
  return `${added}^`;
}

/** The API routes over a memory pool and an in-memory PGlite, built from the sources in `dir`. */
async function buildApp(dir: string): Promise<{ app: FastifyInstance; close(): Promise<void> }> {
  const load = <T>(path: string): Promise<T> => import(pathToFileURL(join(dir, path)).href) as Promise<T>;
  const { createPgliteDatabase } = await load<typeof Pglite>('src/store/pglite.ts');
  const { migrate } = await load<typeof Migrations>('src/store/migrations.ts');
  const { PostgresBizStore } = await load<typeof BizStore>('src/store/biz-store.ts');
  const { MemoryPool } = await load<typeof Memory>('src/dispenser/sources/memory.ts');
  const { Dispenser } = await load<typeof DispenserModule>('src/dispenser/dispenser.ts');
  const { createFastify } = await load<typeof Base>('src/http/base.ts');
  const { idRoutes } = await load<typeof Routes>('src/http/routes-ids.ts');
  const db = await createPgliteDatabase();
  await migrate(db);
  const store = new PostgresBizStore(db, { owner: 'bench' });
  await store.createBiz({ bizTag: 'demo', step: 100_000 });
  const memory = new MemoryPool({ allocator: store });
  const dispenser = new Dispenser({ store, pools: { memory } });
  const app = createFastify({ component: 'http' });
  await app.register(idRoutes, { dispenser, decode: () => ({}) });
  await app.ready();
  return {
    app,
    async close() {
      await app.close();
      await memory.close();
      await store.close();
      await db.close();
    },
  };
}

/**
 * Requests per CPU-second (this process's user + system time) of BATCHES batches of CONCURRENCY
 * concurrent requests. CPU time, not wall time: on a shared machine the wall clock measures what
 * share of the cores the neighbours left, the CPU time what the code costs.
 */
async function batch(app: FastifyInstance): Promise<number> {
  const started = process.cpuUsage();
  for (let b = 0; b < BATCHES; b++) {
    const answers = await Promise.all(Array.from({ length: CONCURRENCY }, () => app.inject({ method: 'GET', url: '/v1/ids/demo?count=1' })));
    if (answers.some((a) => a.statusCode !== 200)) throw new Error(`a request failed: ${answers.find((a) => a.statusCode !== 200)!.body}`);
  }
  const used = process.cpuUsage(started);
  return (BATCHES * CONCURRENCY * 1e6) / (used.user + used.system);
}

/** Alternating rounds (the order flips each round); the medians and the ratio b/a. */
async function compare(a: FastifyInstance, b: FastifyInstance): Promise<{ a: number; b: number; ratios: number[] }> {
  for (let i = 0; i < 5; i++) await Promise.all([batch(a), batch(b)]);
  const ra: number[] = [];
  const rb: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    if (i % 2 === 0) {
      ra.push(await batch(a));
      rb.push(await batch(b));
    } else {
      rb.push(await batch(b));
      ra.push(await batch(a));
    }
  }
  return { a: median(ra), b: median(rb), ratios: ra.map((x, i) => rb[i]! / x) };
}

export async function run(): Promise<Section> {
  const ref = baselineRef();
  const commit = git(['rev-parse', '--short', ref]);
  const baseDir = mkdtempSync(join(tmpdir(), 'idmint-bench-baseline-'));
  git(['worktree', 'add', '--detach', baseDir, ref]);
  if (!existsSync(join(baseDir, 'node_modules'))) symlinkSync(join(here, 'node_modules'), join(baseDir, 'node_modules'));
  const opened: Array<{ close(): Promise<void> }> = [];
  try {
    const before = await buildApp(baseDir);
    const off = await buildApp(here);
    opened.push(before, off);
    const phase1 = await compare(before.app, off.app);

    const { BatchSpanProcessor, InMemorySpanExporter } = await import('@opentelemetry/sdk-trace-base');
    const { NodeTracerProvider } = await import('@opentelemetry/sdk-trace-node');
    const exporter = new InMemorySpanExporter();
    const provider = new NodeTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] });
    provider.register();
    const drain = setInterval(() => exporter.reset(), 1000);
    // Built after the registration: the HTTP hooks are installed only then.
    const on = await buildApp(here);
    opened.push(on);
    const phase2 = await compare(before.app, on.app);
    clearInterval(drain);
    await provider.shutdown();

    const pct = (x: number): string => `${(x * 100).toFixed(1)} %`;
    const rows = [
      [`before tracing (${commit})`, perSecond(phase1.a), '100 %', '—'],
      ['tracing off (no SDK registered)', perSecond(phase1.b), pct(phase1.b / phase1.a), pct(median(phase1.ratios))],
      [`before tracing (${commit}), with an SDK registered`, perSecond(phase2.a), '100 %', '—'],
      ['tracing on (batch processor, in-memory exporter)', perSecond(phase2.b), pct(phase2.b / phase2.a), pct(median(phase2.ratios))],
    ];
    return {
      title: 'Tracing: HTTP `count=1` per request, off and on, against the code before tracing (one process)',
      body: [
        `fastify \`inject()\` of \`GET /v1/ids/demo?count=1\` (memory pool, in-memory PGlite), ${CONCURRENCY} concurrent, ${ROUNDS} alternating rounds of ${BATCHES * CONCURRENCY} requests per app, measured in requests per CPU-second of this process (the machine is shared: wall-clock rates measure the neighbours). Medians, and "paired": the median over rounds of the ratio of the two runs side by side in that round (the steadiest on a shared machine).`,
        '',
        table(['app', 'req per CPU-s (median)', 'vs before', 'paired (median of round ratios)'], rows),
        '',
        'The target: tracing off ≥ 98 % of before (issue 45). Tracing on makes 3 spans per request (HTTP server, dispense, pool take).',
      ].join('\n'),
    };
  } finally {
    for (const o of opened) await o.close().catch(() => undefined);
    git(['worktree', 'remove', '--force', baseDir]);
  }
}
