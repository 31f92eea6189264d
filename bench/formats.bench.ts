/**
 * ID formats: encode and decode rates per format on one core, beside the `sqids` npm package
 * used directly and a plain `toString(36)`, in the same run. Target: the 53-bit Feistel
 * permutation ≥ 10 M/s on one core. Reproduce: `npm run bench -- formats`.
 */
import Sqids from 'sqids';
import { TagFormats } from '../src/app/formats.js';
import { FEISTEL_ROUNDS, FeistelPermutation } from '../src/core/format/feistel.js';
import type { IdFormat } from '../src/core/format/format.js';
import type { BizTag } from '../src/core/ports.js';
import { median, perSecond, table, type Section } from './lib.js';

const N = 200_000;
const ROUNDS = 3;

function measure(fn: (i: number) => unknown): number {
  const rates: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    let sink = 0;
    const t0 = process.hrtime.bigint();
    for (let i = 1; i <= N; i++) {
      const v = fn(i);
      sink += typeof v === 'number' ? v : String(v).length;
    }
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    if (sink === -1) console.log(sink);
    rates.push(N / s);
  }
  return median(rates);
}

function tag(format: IdFormat): BizTag {
  const now = new Date();
  return {
    bizTag: `bench-${format}`,
    mode: 'segment',
    step: 1000,
    maxLimit: null,
    shards: 1,
    fallback: 'error',
    pool: 'auto',
    format,
    description: '',
    createdAt: now,
    updatedAt: now,
  };
}

export async function run(): Promise<Section> {
  const formats = new TagFormats('bench-formats-key-0000000000001');
  const keys = Array.from({ length: FEISTEL_ROUNDS }, (_, i) => (i * 0x27d4eb2f + 7) >>> 0);
  const feistel = new FeistelPermutation((1n << 53n) - 1n, keys);
  const sqids = new Sqids();
  const rows: Array<Array<string | number>> = [];
  const feistelRate = measure((i) => feistel.forwardNumber(i));
  rows.push(['53-bit Feistel permutation (numbers)', perSecond(feistelRate), perSecond(measure((i) => feistel.inverseNumber(i))), 'core, no string']);
  for (const format of ['obfuscated', 'base62', 'sqids', 'obfuscated+base62', 'obfuscated+sqids'] as const) {
    const codec = formats.codecFor(tag(format))!;
    const encoded = Array.from({ length: N + 1 }, (_, i) => (i === 0 ? '' : codec.encode(String(i))));
    rows.push([
      `\`${format}\` (string in, string out)`,
      perSecond(measure((i) => codec.encode(String(i)))),
      perSecond(measure((i) => codec.decode(encoded[i]!))),
      'as served',
    ]);
  }
  const sq = Array.from({ length: N + 1 }, (_, i) => sqids.encode([i]));
  rows.push([
    '`sqids` npm package directly (baseline)',
    perSecond(measure((i) => sqids.encode([i]))),
    perSecond(measure((i) => sqids.decode(sq[i]!)[0])),
    'peer',
  ]);
  rows.push([
    '`n.toString(36)` / `parseInt(s, 36)` (baseline)',
    perSecond(measure((i) => i.toString(36))),
    perSecond(measure((i) => parseInt(i.toString(36), 36))),
    'floor',
  ]);
  const met = feistelRate >= 10e6;
  return {
    title: 'ID formats',
    body: [
      `One core, medians of ${ROUNDS} rounds of ${N.toLocaleString('en')} IDs each, same run. Reproduce: \`npm run bench -- formats\`.`,
      '',
      table(['what', 'encode/s', 'decode/s', 'note'], rows),
      '',
      `Target ≥ 10 M/s for the 53-bit Feistel permutation on one core: **${met ? 'met' : 'not met'}** (${perSecond(feistelRate)}/s).`,
    ].join('\n'),
  };
}
