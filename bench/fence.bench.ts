/**
 * What the segment fence costs: segments allocated one after another (one allocator, the latency
 * a refill or an empty buffer waits) and by 16 concurrent allocators, bare against fenced in
 * ZooKeeper, on private Postgres and ZooKeeper servers, alternating rounds.
 * Reproduce: `npm run bench -- fence`.
 */
import { fenceStore } from '../src/fence/fence.js';
import { ZookeeperFence } from '../src/fence/zookeeper-fence.js';
import { PostgresBizStore } from '../src/store/biz-store.js';
import { migrate } from '../src/store/migrations.js';
import { createPgDatabase } from '../src/store/pg.js';
import { startPrivateServer } from '../test/support/servers.js';
import { median, table, type Section } from './lib.js';

const ROUND_MS = 3000;
const ROUNDS = 3;

interface Round {
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
}

async function round(allocate: () => Promise<unknown>, concurrency: number): Promise<Round> {
  const latencies: number[] = [];
  const until = performance.now() + ROUND_MS;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        const t0 = performance.now();
        await allocate();
        latencies.push(performance.now() - t0);
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  return {
    perSecond: latencies.length / ((performance.now() - started) / 1000),
    p50Ms: latencies[Math.floor(latencies.length / 2)]!,
    p99Ms: latencies[Math.floor(latencies.length * 0.99)]!,
  };
}

export async function run(): Promise<Section> {
  const postgres = await startPrivateServer('postgres');
  const zookeeper = await startPrivateServer('zookeeper');
  const db = createPgDatabase({ connectionString: postgres.url, max: 20 });
  const fence = await ZookeeperFence.open({ connect: zookeeper.url, root: '/idmint-bench/fence' });
  try {
    await migrate(db);
    const store = new PostgresBizStore(db, { owner: 'bench' });
    const fenced = fenceStore(store, fence);
    await store.createBiz({ bizTag: 'bare', step: 1000 });
    await store.createBiz({ bizTag: 'fenced', step: 1000 });
    const rows: Array<Array<string | number>> = [];
    let oneAllocatorCostMs = Number.NaN;
    for (const concurrency of [1, 16]) {
      const bare: Round[] = [];
      const withFence: Round[] = [];
      await round(() => store.allocate('bare', 1000), concurrency); // warm
      await round(() => fenced.allocate('fenced', 1000), concurrency);
      for (let i = 0; i < ROUNDS; i++) {
        bare.push(await round(() => store.allocate('bare', 1000), concurrency));
        withFence.push(await round(() => fenced.allocate('fenced', 1000), concurrency));
      }
      const m = (rs: Round[], k: keyof Round): number => median(rs.map((r) => r[k]));
      if (concurrency === 1) oneAllocatorCostMs = m(withFence, 'p50Ms') - m(bare, 'p50Ms');
      rows.push([
        `${concurrency} allocator${concurrency > 1 ? 's' : ''}`,
        `${Math.round(m(withFence, 'perSecond')).toLocaleString('en-US')} segments/s, p50 ${m(withFence, 'p50Ms').toFixed(2)} ms, p99 ${m(withFence, 'p99Ms').toFixed(2)} ms`,
        `${Math.round(m(bare, 'perSecond')).toLocaleString('en-US')} segments/s, p50 ${m(bare, 'p50Ms').toFixed(2)} ms, p99 ${m(bare, 'p99Ms').toFixed(2)} ms`,
        `+${(m(withFence, 'p50Ms') - m(bare, 'p50Ms')).toFixed(2)} ms p50 (${(m(withFence, 'perSecond') / m(bare, 'perSecond')).toFixed(2)} × the rate)`,
      ]);
    }
    return {
      title: 'Segment fence (ZooKeeper) per segment',
      body: [
        'Each fenced segment adds a ZooKeeper read confirmed through the leader (a one-check multi) before the allocation and a version-checked write after it.',
        `Rounds of ${ROUND_MS / 1000} s, ${ROUNDS} of each, alternating, medians; private Postgres 15 and ZooKeeper on loopback; step 1000 (a segment is 1000 IDs).`,
        `Target: a fenced segment costs under 5 ms more at p50 with one allocator — segments are rare (a 1000-ID segment per 1000 IDs at the least; refills take larger ones): ${oneAllocatorCostMs < 5 ? 'met' : 'not met'} (+${oneAllocatorCostMs.toFixed(2)} ms).`,
        'Sixteen allocators of one tag contend for its mark (version-checked writes retry), which caps one tag at about 500 fenced segments/s here — 500,000 IDs/s at step 1000, more as segments grow with demand.',
        '',
        table(['Allocators', 'Fenced', 'Bare (same run)', 'Cost'], rows),
      ].join('\n'),
    };
  } finally {
    await fence.close();
    await db.close();
    await zookeeper.close();
    await postgres.close();
  }
}
