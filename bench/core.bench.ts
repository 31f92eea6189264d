/**
 * Core generators side by side with popular peers: IDs/s and duplicates in 4,000,000 IDs from a
 * tight loop. Each generator has its own loop so V8 optimises every call site separately; each
 * loop stores every ID (typed arrays for numbers and bigints) so duplicates can be counted after.
 */
import { createRequire } from 'node:module';
import os from 'node:os';
import { Snowflake as SapphireSnowflake } from '@sapphire/snowflake';
import { Snowflake as WasmSnowflake } from 'nodejs-snowflake';
import { monotonicFactory } from 'ulid';
import { v7 as uuidv7 } from 'uuid';
import { CachedUidGenerator, SegmentBuffer, SnowflakeGenerator } from '../src/core/index.js';
import type { Segment } from '../src/core/ports.js';
import { duplicatesInStrings, duplicatesInTyped, median, perSecond, table, type Section } from './lib.js';

const N = 4_000_000;
const ROUNDS = 3;
const require = createRequire(import.meta.url);
// flake-idgen ships no types; this is the part we use.
const FlakeId = require('flake-idgen') as new (options: { id: number }) => { next(): Buffer };

type Output = BigInt64Array | BigUint64Array | Float64Array | string[];
interface Case {
  name: string;
  returns: string;
  target?: number;
  note?: string;
  /** Fills `out` with N IDs from a fresh generator; returns the seconds spent. */
  fill: () => Promise<Timing<Output>>;
}

interface Timing<T> {
  seconds: number;
  /** CPU time this process got over wall time: below 1 means other processes took the core. */
  cpuShare: number;
  out: T;
}

function finish<T>(t0: bigint, c0: NodeJS.CpuUsage, out: T): Timing<T> {
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(c0);
  return { seconds, cpuShare: (cpu.user + cpu.system) / 1e6 / seconds, out };
}

function timed<T extends Output>(out: T, loop: (out: T) => void): Timing<T> {
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  loop(out);
  return finish(t0, c0, out);
}

async function timedAsync<T extends Output>(out: T, loop: (out: T) => Promise<void>): Promise<Timing<T>> {
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  await loop(out);
  return finish(t0, c0, out);
}

function memoryAllocator(): (bizTag: string, step: number) => Promise<Segment> {
  let maxId = 0;
  return async (bizTag, step) => {
    const start = maxId + 1;
    maxId += step;
    return { bizTag, shard: 0, start, end: maxId };
  };
}

async function segmentBuffer(): Promise<SegmentBuffer> {
  const buf = new SegmentBuffer({ bizTag: 'bench', baseStep: 1_000_000, maxStep: 10_000_000, allocate: memoryAllocator() });
  await buf.nextBatch(0);
  return buf;
}

const cases: Case[] = [
  {
    name: 'idmint SnowflakeGenerator',
    returns: 'bigint',
    target: 3.9e6,
    fill: async () => {
      const g = new SnowflakeGenerator({ workerId: 1 });
      return timed(new BigInt64Array(N), (out) => {
        for (let i = 0; i < N; i++) out[i] = g.nextId();
      });
    },
  },
  {
    name: '@sapphire/snowflake',
    returns: 'bigint',
    note: 'increment wraps at 4096 regardless of the millisecond',
    fill: async () => {
      const g = new SapphireSnowflake(Date.UTC(2015, 0, 1));
      return timed(new BigInt64Array(N), (out) => {
        for (let i = 0; i < N; i++) out[i] = g.generate();
      });
    },
  },
  {
    name: 'nodejs-snowflake (wasm)',
    returns: 'bigint',
    fill: async () => {
      const g = new WasmSnowflake({ instance_id: 1 });
      return timed(new BigInt64Array(N), (out) => {
        for (let i = 0; i < N; i++) out[i] = g.getUniqueID() as bigint;
      });
    },
  },
  {
    name: 'flake-idgen',
    returns: 'Buffer',
    note: 'throws on sequence overflow; the loop retries',
    fill: async () => {
      const g = new FlakeId({ id: 1 });
      return timed(new BigUint64Array(N), (out) => {
        for (let i = 0; i < N; i++) {
          try {
            out[i] = g.next().readBigUInt64BE(0);
          } catch {
            i--;
          }
        }
      });
    },
  },
  {
    name: 'uuid v7',
    returns: 'string',
    fill: async () =>
      timed(new Array<string>(N), (out) => {
        for (let i = 0; i < N; i++) out[i] = uuidv7();
      }),
  },
  {
    name: 'ulid (monotonic)',
    returns: 'string',
    fill: async () => {
      const g = monotonicFactory();
      return timed(new Array<string>(N), (out) => {
        for (let i = 0; i < N; i++) out[i] = g();
      });
    },
  },
  {
    name: 'plain counter',
    returns: 'number',
    fill: async () => {
      let c = 0;
      return timed(new Float64Array(N), (out) => {
        for (let i = 0; i < N; i++) out[i] = ++c;
      });
    },
  },
  {
    name: 'idmint CachedUidGenerator getUid()',
    returns: 'bigint',
    target: 10e6,
    note: 'a tight loop never yields, so the empty ring is padded inline',
    fill: async () => {
      const g = new CachedUidGenerator({ workerId: 1 });
      g.start();
      const r = timed(new BigInt64Array(N), (out) => {
        for (let i = 0; i < N; i++) out[i] = g.getUid();
      });
      g.close();
      return r;
    },
  },
  {
    name: 'idmint SegmentBuffer tryNext()',
    returns: 'number',
    target: 50e6,
    note: 'in-memory allocator, step 1 M growing to 10 M; `?? await next()` at segment ends',
    fill: async () => {
      const buf = await segmentBuffer();
      const r = await timedAsync(new Float64Array(N), async (out) => {
        for (let i = 0; i < N; i++) out[i] = buf.tryNext() ?? (await buf.next());
      });
      buf.close();
      return r;
    },
  },
  {
    name: 'idmint SegmentBuffer await next()',
    returns: 'number',
    note: 'one await per ID',
    fill: async () => {
      const buf = await segmentBuffer();
      const r = await timedAsync(new Float64Array(N), async (out) => {
        for (let i = 0; i < N; i++) out[i] = await buf.next();
      });
      buf.close();
      return r;
    },
  },
];

function duplicates(out: Output): number {
  return Array.isArray(out) ? duplicatesInStrings(out) : duplicatesInTyped(out);
}

export async function run(): Promise<Section> {
  const loadAtStart = os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(', ');
  const rows: string[][] = [];
  for (const c of cases) {
    await c.fill(); // warm-up round: JIT and lazy set-up
    const rates: number[] = [];
    const shares: number[] = [];
    let dups = 0;
    for (let r = 0; r < ROUNDS; r++) {
      const { seconds, cpuShare, out } = await c.fill();
      rates.push(N / seconds);
      shares.push(cpuShare);
      dups = Math.max(dups, duplicates(out));
    }
    const rate = median(rates);
    const best = Math.max(...rates);
    const verdict = c.target === undefined ? '' : rate >= c.target && dups === 0 ? `≥ ${perSecond(c.target)}: met` : `≥ ${perSecond(c.target)}: **missed**`;
    const share = `${Math.round(Math.min(...shares) * 100)}–${Math.round(Math.max(...shares) * 100)} %`;
    rows.push([c.name, c.returns, perSecond(rate), perSecond(best), dups.toLocaleString('en-US'), share, verdict, c.note ?? '']);
    console.log(`  ${c.name}: ${perSecond(rate)} IDs/s (best ${perSecond(best)}), ${dups} duplicates, CPU share ${share}`);
  }
  return {
    title: 'Core generators (bench/core.bench.ts)',
    body: [
      `Each row: one fresh generator per round, ${N.toLocaleString('en-US')} IDs from a tight loop stored in an array; IDs/s is the median of ${ROUNDS} rounds after a warm-up round;`,
      "duplicates is the most found in any round (sorting the round's IDs).",
      "A 12-bit sequence allows at most 4.096 M IDs/s per worker; Leaf's random start per millisecond (in [0, 100)) lowers that to about 4.05 M.",
      '`DefaultUidGenerator` is left out: by design it issues at most 8,192 IDs per second (13-bit sequence per second).',
      '',
      "CPU share is the CPU time the process got over wall time in the rounds (V8's GC threads can push it past 100 %); below 100 % the machine was busy and clock-bound",
      'generators (Snowflake) lose whole milliseconds of sequence while descheduled.',
      `Load average (1, 5, 15 min) at the start: ${loadAtStart}.`,
      '',
      table(
        ['generator', 'returns', 'IDs/s (median)', 'IDs/s (best)', `duplicates in ${N.toLocaleString('en-US')}`, 'CPU share', 'target (median)', 'note'],
        rows,
      ),
    ].join('\n'),
  };
}
