import { afterAll, describe, expect, it } from 'vitest';
import { createSnowflakeSource } from '../../../src/dispenser/sources/snowflake.js';
import { ZooKeeperWorkerIdProvider } from '../../../src/worker-id/index.js';
import { env } from '../../support/env.js';
import { expectNoDuplicates } from '../../support/unique.js';
import { tempDir, zkRoots } from './helpers.js';

const roots = zkRoots();
afterAll(() => roots.removeAll());

// Issue 43, measured on 75daf01: a persistent sequential node per address, its never-reused
// sequence the worker id, so starts 1,024 to 1,099 of 1,100 (one live at a time, each with a new
// address, as a Deployment's restarts give) failed with "the worker-id space is exhausted". This
// test uses only the API that commit had, so it runs against it too (and fails there).
describe('ZooKeeper worker ids across a Deployment’s restarts', () => {
  it('1,100 starts one after another, each with a new address and closed before the next: every one served on the 10-bit space, 0 duplicate IDs', async () => {
    const root = roots.next();
    const dataDir = tempDir();
    const workers: number[] = [];
    const ids: bigint[] = [];
    const started = Date.now();
    for (let i = 0; i < 1100; i++) {
      const provider = new ZooKeeperWorkerIdProvider({
        connect: env('ZK_CONNECT'),
        address: `10.43.${i >> 8}.${i & 255}:8080`,
        root,
        dataDir,
        markAheadMs: 50,
      });
      let source;
      try {
        source = await createSnowflakeSource({ provider });
      } catch (err) {
        throw new Error(`start ${i} of 1,100 was refused: ${(err as Error).message}`, { cause: err });
      }
      workers.push(source.workerId);
      ids.push(...source.nextIds(5));
      await source.close();
    }
    console.info(`1,100 starts: ${new Set(workers).size} distinct worker ids, ${ids.length} IDs, ${Date.now() - started} ms`);
    expect(workers).toHaveLength(1100);
    expectNoDuplicates(ids, 'Snowflake IDs across 1,100 starts');
  }, 300_000);
});
