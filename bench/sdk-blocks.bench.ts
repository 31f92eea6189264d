/**
 * The SDK on blocks (segment tag, embedded server): the synchronous takes and `await next()`,
 * each beside the floor a caller pays anyway, measured in the same run:
 *   tag.tryNextNumber()       vs  a plain counter loop (`last = ++c`)                  target ≥ 0.5 ×
 *   tag.tryNextNumbers(array) vs  a plain counter loop writing each ID into an array   target ≥ 0.5 ×
 *   await tag.next()          vs  awaiting an async function returning a bigint counter  target ≥ 0.5 ×
 * The synchronous takes are timed as synchronous code uses them: take until the buffer is empty,
 * then await one ID (the block fetches are in the time). Two more rows, without targets, show what
 * the per-call take costs: the same take behind `?? await` in an async loop, and the least any
 * per-call API costs in V8 (a method bumping a counter held on an object).
 * Reproduce: `npm run bench -- sdk-blocks`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createIdmintClient } from '../src/client/index.js';
import { spawnServer } from '../test/support/spawn.js';
import { median, perSecond, table, type Section } from './lib.js';

const N = 5_000_000;
const ROUNDS = 7;

async function rate(fn: () => number | Promise<number>, n: number): Promise<number> {
  const t0 = process.hrtime.bigint();
  const sink = await fn();
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  if (sink === -1) console.log(sink);
  return n / s;
}

/** The least a per-call take can cost: one method, one counter on an object, one bound check. */
class MethodCounter {
  private next = 1;
  private stop = Number.MAX_SAFE_INTEGER;
  take(): number | undefined {
    const id = this.next;
    if (id < this.stop) {
      this.next = id + 1;
      return id;
    }
    return undefined;
  }
}

export async function run(): Promise<Section> {
  const dataDir = mkdtempSync(join(tmpdir(), 'idmint-bench-sdk-'));
  const server = await spawnServer({ IDMINT_DATA_DIR: dataDir, LOG_LEVEL: 'warn', IDMINT_MAX_BLOCK_COUNT: '100000000' });
  const client = createIdmintClient({ url: server.url, batchSize: 1_000_000, maxBatchSize: 50_000_000 });
  const demo = client.tag('demo');
  try {
    const out = new Float64Array(N);
    // Synchronous code: take until the buffer is empty, then await one ID and go on.
    let last = 0;
    const takeUntilEmpty = (from: number): number => {
      let i = from;
      let id: number | undefined;
      for (; i < N && (id = demo.tryNextNumber()) !== undefined; i++) last = id;
      return i;
    };
    const syncTake = async (): Promise<number> => {
      for (let i = takeUntilEmpty(0); i < N; i = takeUntilEmpty(i + 1)) last = await demo.nextNumber();
      return last;
    };
    const bulkTake = async (): Promise<number> => {
      let i = 0;
      while (i < N) {
        const k = demo.tryNextNumbers(out, i);
        i += k;
        if (k === 0) out[i++] = await demo.nextNumber();
      }
      return out[N - 1]!;
    };
    const asyncLoopTake = async (): Promise<number> => {
      for (let i = 0; i < N; i++) last = demo.tryNextNumber() ?? (await demo.nextNumber());
      return last;
    };
    const counter = (): number => {
      let c = 0;
      let last = 0;
      for (let i = 0; i < N; i++) last = ++c;
      return last;
    };
    // The caller's own loop filling an array it is given, as the SDK's is.
    const counterIntoGiven = (into: Float64Array, n: number): number => {
      let c = 0;
      for (let i = 0; i < n; i++) into[i] = ++c;
      return c;
    };
    const counterInto = (): number => counterIntoGiven(out, N);
    // The same loop over an array V8 sees as a constant: it folds the bounds checks away.
    const counterIntoConstant = (): number => {
      let c = 0;
      for (let i = 0; i < N; i++) out[i] = ++c;
      return out[N - 1]!;
    };
    const method = new MethodCounter();
    const methodTake = (): number => {
      let last = 0;
      for (let i = 0; i < N; i++) last = method.take() ?? 0;
      return last;
    };
    let big = 0n;
    const asyncCounter = async (): Promise<bigint> => ++big;
    const awaitNext = async (n: number): Promise<number> => {
      let last = 0n;
      for (let i = 0; i < n; i++) last = await demo.next();
      return Number(last);
    };
    const awaitFloor = async (n: number): Promise<number> => {
      let last = 0n;
      for (let i = 0; i < n; i++) last = await asyncCounter();
      return Number(last);
    };
    const callers = 64;
    const awaitNext64 = async (n: number): Promise<number> => {
      const each = async (): Promise<bigint> => {
        let last = 0n;
        for (let i = 0; i < n / callers; i++) last = await demo.next();
        return last;
      };
      return Number((await Promise.all(Array.from({ length: callers }, each)))[0]);
    };
    const awaitFloor64 = async (n: number): Promise<number> => {
      const each = async (): Promise<bigint> => {
        let last = 0n;
        for (let i = 0; i < n / callers; i++) last = await asyncCounter();
        return last;
      };
      return Number((await Promise.all(Array.from({ length: callers }, each)))[0]);
    };
    await syncTake(); // warm: JIT and the first blocks
    await bulkTake();
    const rows = {
      sync: [] as number[],
      plain: [] as number[],
      bulk: [] as number[],
      plainInto: [] as number[],
      plainConst: [] as number[],
      asyncLoop: [] as number[],
      method: [] as number[],
    };
    const awaited: number[] = [];
    const floor: number[] = [];
    const awaited64: number[] = [];
    const floor64: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      awaited64.push(await rate(() => awaitNext64(N / 5), N / 5));
      floor64.push(await rate(() => awaitFloor64(N / 5), N / 5));
      rows.sync.push(await rate(syncTake, N));
      rows.plain.push(await rate(counter, N));
      rows.bulk.push(await rate(bulkTake, N));
      rows.plainInto.push(await rate(counterInto, N));
      rows.plainConst.push(await rate(counterIntoConstant, N));
      rows.asyncLoop.push(await rate(asyncLoopTake, N));
      rows.method.push(await rate(methodTake, N));
      awaited.push(await rate(() => awaitNext(N / 5), N / 5));
      floor.push(await rate(() => awaitFloor(N / 5), N / 5));
    }
    const [s, p, bk, pi, pc, al, m] = [rows.sync, rows.plain, rows.bulk, rows.plainInto, rows.plainConst, rows.asyncLoop, rows.method].map(median) as [
      number,
      number,
      number,
      number,
      number,
      number,
      number,
    ];
    const [a, f] = [median(awaited), median(floor)];
    const [a64, f64] = [median(awaited64), median(floor64)];
    const ratio = (x: number, y: number, target?: number): string[] => [
      (x / y).toFixed(2),
      target === undefined ? '' : `≥ ${target}`,
      target === undefined ? '' : x / y >= target ? 'yes' : 'no',
    ];
    return {
      title: 'SDK on blocks',
      body: [
        `Embedded server, segment tag \`demo\`, one caller (64 where the row says so), medians of ${ROUNDS} alternating rounds (${N.toLocaleString('en')} IDs per synchronous round, block fetches included). The synchronous takes run as synchronous code uses them: take until the buffer is empty, then await one ID. Reproduce: \`npm run bench -- sdk-blocks\`.`,
        '',
        table(
          ['what', 'IDs/s', 'baseline', 'baseline/s', 'ratio', 'target', 'met'],
          [
            ['`tag.tryNextNumber()`', perSecond(s), 'plain counter loop (`last = ++c`)', perSecond(p), ...ratio(s, p, 0.5)],
            [
              '`tag.tryNextNumbers(array)` (bulk)',
              perSecond(bk),
              'plain counter loop writing each ID into an array it is given',
              perSecond(pi),
              ...ratio(bk, pi, 0.5),
            ],
            [
              '`tag.tryNextNumbers(array)` (bulk)',
              perSecond(bk),
              'the same loop over an array V8 sees as a constant (bounds checks folded away)',
              perSecond(pc),
              ...ratio(bk, pc),
            ],
            ['`tag.tryNextNumber() ?? await tag.nextNumber()` in an async loop', perSecond(al), 'plain counter loop', perSecond(p), ...ratio(al, p)],
            ['`tag.tryNextNumber()`', perSecond(s), 'the least a per-call take costs: a method bumping a counter on an object', perSecond(m), ...ratio(s, m)],
            ['`await tag.next()` (bigint)', perSecond(a), 'await an async bigint counter', perSecond(f), ...ratio(a, f, 0.5)],
            ['`await tag.next()` (bigint), 64 callers', perSecond(a64), 'the same floor, 64 callers', perSecond(f64), ...ratio(a64, f64, 0.25)],
          ],
        ),
        '',
        `A per-call take cannot reach half of a loop that keeps its counter in a register: each call loads, checks and stores a counter held on an object, and the least such a method costs is ${(m / p).toFixed(2)} × the plain loop in this run. \`tryNextNumbers\` moves the counter loop into the SDK: the synchronous take for callers who want speed, and the one that meets the target. An \`await\` inside the loop (the async-loop row) makes V8 compile the loop as a resumable generator and costs more than the take itself: take until \`undefined\` in synchronous code, then await.`,
      ].join('\n'),
    };
  } finally {
    await client.close();
    await server.stop('SIGTERM');
    rmSync(dataDir, { recursive: true, force: true });
  }
}
