import { defineConfig } from 'vitest/config';

// Five projects: unit (pure, fast), integration (real servers), e2e (spawned processes, and the
// fuzzers in test/fuzz, which drive real servers), chaos (the long proofs: the fault harness
// under load and the ledger at the size of a long run) and chaos-ha (the harness's short run on
// replicated servers). `npm test` runs the first three; `npm run test:chaos` and
// `npm run test:chaos-ha` the others, each as its own CI step. Integration, e2e and chaos share one global
// setup that uses the servers the environment names, or starts them with scripts/infra.sh.
const servers: { environment: 'node'; globalSetup: string[] } = { environment: 'node', globalSetup: ['test/support/global-setup.ts'] };

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          environment: 'node',
          // CPU-bound proofs (a million IDs) take seconds on a busy machine; a hung test still fails.
          testTimeout: 30_000,
          // Projects run one after another, each with its own worker count.
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          ...servers,
          name: 'integration',
          sequence: { groupOrder: 1 },
          include: ['test/integration/**/*.test.ts', 'test/contracts/**/*.test.ts'],
          // Two files at once: they share the servers but never a name (measured: 97 s instead of 182 s).
          maxWorkers: 2,
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          ...servers,
          name: 'e2e',
          sequence: { groupOrder: 2 },
          include: ['test/e2e/**/*.test.ts', 'test/fuzz/**/*.test.ts'],
          testTimeout: 180_000,
          hookTimeout: 180_000,
          // Spawned servers compete for two cores; one file at a time keeps them honest.
          fileParallelism: false,
        },
      },
      {
        test: {
          ...servers,
          name: 'chaos',
          sequence: { groupOrder: 3 },
          include: ['test/chaos/**/*.test.ts'],
          testTimeout: 600_000,
          hookTimeout: 180_000,
          fileParallelism: false,
        },
      },
      {
        // The short chaos run on replicated servers (it starts its own: the shared ones are not used).
        test: {
          name: 'chaos-ha',
          environment: 'node',
          sequence: { groupOrder: 4 },
          include: ['test/chaos-ha/**/*.test.ts'],
          testTimeout: 900_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
