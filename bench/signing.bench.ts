/**
 * What a signed pool block costs (issue 40): the refill's Ed25519 signature and every SDK
 * consumer's check (decode, then `blockRefusal`: the place, the signature, the age, the sequence),
 * beside the HMAC-SHA256 scheme they replaced (the retired `blockKey`: a shared key, the MAC over
 * tag, shard, start and end) and beside decoding alone, over the same blocks in the same run.
 * CPU only, no server. Reproduce: `npm run bench -- signing`.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { blockRefusal } from '../src/client/kafka/block-refusal.js';
import { decodePoolBlock, encodePoolBlock } from '../src/kafka/messages.js';
import { blockBytes, parseVerifyKeys, type BlockPlace } from '../src/kafka/signing.js';
import { TEST_SIGNING_KEY, TEST_VERIFY_KEY } from '../test/support/signing.js';
import { median, perSecond as perSecondIds, table, type Section } from './lib.js';

const BLOCKS = 2000;
const ROUND_MS = 1000;
const ROUNDS = 5;
const HMAC_KEY = Buffer.alloc(32, 7);
const TOPIC = 'idmint.pool.bench';

interface Block {
  place: BlockPlace;
  signed: Buffer;
  /** The same block as the retired scheme wrote it: no place, an HMAC. */
  legacy: Buffer;
}

const legacyBytes = (p: BlockPlace): Buffer => Buffer.from(`${p.bizTag}\n${p.shard}\n${p.start}\n${p.end}`);
const hmac = (bytes: Buffer): Buffer => createHmac('sha256', HMAC_KEY).update(bytes).digest();

function blocks(idsPerBlock: number): Block[] {
  const at = String(Date.now());
  return Array.from({ length: BLOCKS }, (_, i) => {
    const start = 1_000_000_000 + i * idsPerBlock;
    const place: BlockPlace = {
      namespace: '',
      topic: TOPIC,
      partition: i % 16,
      seq: String(start),
      at,
      bizTag: 'bench',
      shard: 0,
      start: String(start),
      end: String(start + idsPerBlock - 1),
    };
    const signed = encodePoolBlock('bench', start, start + idsPerBlock - 1, {
      seq: place.seq,
      at,
      signature: { kid: TEST_SIGNING_KEY.kid, sig: TEST_SIGNING_KEY.sign(blockBytes(place)) },
    });
    const legacy = Buffer.from(
      JSON.stringify({ v: 1, bizTag: 'bench', start: place.start, end: place.end, mac: hmac(legacyBytes(place)).toString('base64url') }),
    );
    return { place, signed, legacy };
  });
}

/** Operations per second of `op` over the blocks, in rounds of ROUND_MS. */
function rate(items: Block[], op: (b: Block) => void): number {
  let done = 0;
  const started = performance.now();
  while (performance.now() - started < ROUND_MS) {
    for (const b of items) op(b);
    done += items.length;
  }
  return done / ((performance.now() - started) / 1000);
}

export async function run(): Promise<Section> {
  const keys = parseVerifyKeys(TEST_VERIFY_KEY);
  const items = blocks(1000);
  let sink = 0;
  const ops: Array<[string, (b: Block) => void]> = [
    ['Decode only (JSON and schema)', (b) => void (sink += decodePoolBlock(b.signed) ? 1 : 0)],
    [
      'Consumer check, HMAC-SHA256 (retired `blockKey`)',
      (b) => {
        const block = JSON.parse(b.legacy.toString('utf8')) as { bizTag: string; start: string; end: string; mac: string };
        const ok = block.bizTag === 'bench' && timingSafeEqual(hmac(legacyBytes(b.place)), Buffer.from(block.mac, 'base64url'));
        sink += ok ? 1 : 0;
      },
    ],
    [
      'Consumer check, Ed25519 (today: decode and `blockRefusal`)',
      (b) => {
        const refusal = blockRefusal(decodePoolBlock(b.signed), {
          namespace: '',
          topic: TOPIC,
          partition: b.place.partition,
          bizTag: 'bench',
          shard: 0,
          floor: 0,
          keys,
          maxBlockAgeMs: 3_600_000,
        });
        sink += refusal === undefined ? 1 : 0;
      },
    ],
    ['Refill signs, HMAC-SHA256 (retired)', (b) => void (sink += hmac(legacyBytes(b.place)).length)],
    ['Refill signs, Ed25519 (today)', (b) => void (sink += TEST_SIGNING_KEY.sign(blockBytes(b.place)).length)],
  ];
  for (const [, op] of ops) rate(items.slice(0, 200), op); // warm
  const rates = ops.map(() => [] as number[]);
  for (let r = 0; r < ROUNDS; r++) ops.forEach(([, op], i) => rates[i]!.push(rate(items, op)));
  if (sink === 0) throw new Error('nothing was checked');
  const perSecond = rates.map(median);
  const micros = perSecond.map((r) => 1e6 / r);
  const [decode, hmacCheck, edCheck, hmacSign, edSign] = micros as [number, number, number, number, number];
  const rows = ops.map(([name], i) => [
    name,
    `${micros[i]!.toFixed(2)} µs`,
    `${Math.round(perSecond[i]!).toLocaleString('en-US')}/s`,
    `${micros[i]!.toFixed(3)} ns`, // µs per block / 1,000 IDs = ns per ID
    `${(micros[i]! / 1000).toFixed(6)} ns`,
  ]);
  return {
    title: 'Signed pool blocks: what signing and verifying a block costs',
    body: [
      `${BLOCKS.toLocaleString('en-US')} distinct blocks, ${ROUNDS} rounds of ${ROUND_MS / 1000} s per row, alternating, medians; one thread, no server. The consumer's Ed25519 check is the SDK's own code (\`decodePoolBlock\`, then \`blockRefusal\`: tag, shard, signature over namespace, topic, partition, sequence and signing time, age, sequence floor); the HMAC rows rebuild the retired \`blockKey\` scheme (a shared key; the MAC over tag, shard, start and end) over the same blocks.`,
      '',
      table(['Per block', 'Time', 'Blocks per second', 'Per ID, 1,000-ID block', 'Per ID, 1,000,000-ID block'], rows),
      '',
      `- Verifying a block: Ed25519 ${edCheck.toFixed(2)} µs against HMAC ${hmacCheck.toFixed(2)} µs (${(edCheck / hmacCheck).toFixed(1)} ×; decoding alone ${decode.toFixed(2)} µs). One core checks ${Math.round(1e6 / edCheck).toLocaleString('en-US')} blocks a second: ${perSecondIds(1e9 / edCheck)} IDs/s at the refill's smallest block (1,000 IDs), ${perSecondIds(1e12 / edCheck)} at its largest (1,000,000); the pool topics' blocks grow to about two per partition per segment, so at speed they are the large ones.`,
      `- Signing: Ed25519 ${edSign.toFixed(2)} µs per block against HMAC ${hmacSign.toFixed(2)} µs, once per block in the refill.`,
      '- Target: verification on must not take the Kafka pool bench below its targets (its own section, measured with verification on). What the extra microseconds buy: a consumer holds only the public key, so it cannot sign a block of its own, and a block is bound to its place and sequence (a copy is refused).',
      '',
      'Command: `npm run bench -- signing`.',
    ].join('\n'),
  };
}
