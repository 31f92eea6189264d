/**
 * The SDK on blocks (segment tag, embedded server): the synchronous take and `await next()`,
 * each beside the floor a caller pays anyway, measured in the same run:
 *   tag.tryNextNumber()  vs  a plain counter loop (`n++`)                        target ≥ 0.5 ×
 *   await tag.next()     vs  awaiting an async function returning a bigint counter  target ≥ 0.5 ×
 * Reproduce: `npm run bench -- sdk-blocks`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createIdmintClient } from '../src/client/index.js';
import { spawnServer } from '../test/helpers/spawn-server.js';
import { median, perSecond, table, type Section } from './lib.js';

const N = 5_000_000;
const ROUNDS = 5;

function rate(fn: () => number, n: number): number {
  const t0 = process.hrtime.bigint();
  const sink = fn();
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  if (sink === -1) console.log(sink);
  return n / s;
}

async function rateAsync(fn: () => Promise<number>, n: number): Promise<number> {
  const t0 = process.hrtime.bigint();
  const sink = await fn();
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  if (sink === -1) console.log(sink);
  return n / s;
}

export async function run(): Promise<Section> {
  const dataDir = mkdtempSync(join(tmpdir(), 'idmint-bench-sdk-'));
  const server = await spawnServer({ IDMINT_DATA_DIR: dataDir, LOG_LEVEL: 'warn', IDMINT_MAX_BLOCK_COUNT: '100000000' });
  const client = createIdmintClient({ url: server.url, batchSize: 1_000_000, maxBatchSize: 50_000_000 });
  const demo = client.tag('demo');
  try {
    const syncTake = async (n: number): Promise<number> => {
      let last = 0;
      for (let i = 0; i < n; i++) last = demo.tryNextNumber() ?? (await demo.nextNumber());
      return last;
    };
    const counter = (n: number): number => {
      let c = 0;
      let last = 0;
      for (let i = 0; i < n; i++) last = ++c;
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
    await syncTake(N); // warm: JIT and the first blocks
    const sync: number[] = [];
    const plain: number[] = [];
    const awaited: number[] = [];
    const floor: number[] = [];
    const awaited64: number[] = [];
    const floor64: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      awaited64.push(await rateAsync(() => awaitNext64(N / 5), N / 5));
      floor64.push(await rateAsync(() => awaitFloor64(N / 5), N / 5));
      sync.push(await rateAsync(() => syncTake(N), N));
      plain.push(rate(() => counter(N), N));
      awaited.push(await rateAsync(() => awaitNext(N / 5), N / 5));
      floor.push(await rateAsync(() => awaitFloor(N / 5), N / 5));
    }
    const [s, p, a, f] = [median(sync), median(plain), median(awaited), median(floor)];
    const [a64, f64] = [median(awaited64), median(floor64)];
    return {
      title: 'SDK on blocks',
      body: [
        `Embedded server, segment tag \`demo\`, one caller (64 where the row says so), medians of ${ROUNDS} alternating rounds (${N.toLocaleString('en')} IDs per sync round, including the block fetches). Reproduce: \`npm run bench -- sdk-blocks\`.`,
        '',
        table(
          ['what', 'IDs/s', 'baseline', 'baseline/s', 'ratio', 'target', 'met'],
          [
            ['`tag.tryNextNumber()`', perSecond(s), 'plain counter loop', perSecond(p), (s / p).toFixed(2), '≥ 0.5', s / p >= 0.5 ? 'yes' : 'no'],
            ['`await tag.next()` (bigint)', perSecond(a), 'await an async bigint counter', perSecond(f), (a / f).toFixed(2), '≥ 0.5', a / f >= 0.5 ? 'yes' : 'no'],
            ['`await tag.next()` (bigint), 64 callers', perSecond(a64), 'the same floor, 64 callers', perSecond(f64), (a64 / f64).toFixed(2), '≥ 0.25', a64 / f64 >= 0.25 ? 'yes' : 'no'],
          ],
        ),
      ].join('\n'),
    };
  } finally {
    await client.close();
    await server.stop('SIGTERM');
    rmSync(dataDir, { recursive: true, force: true });
  }
}
