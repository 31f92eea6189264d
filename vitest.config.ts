import { defineConfig } from 'vitest/config';

// Six projects: unit (pure, fast), integration (real servers), e2e-pairs and e2e (spawned
// processes, and the fuzzers in test/fuzz, which drive real servers: two files at a time, or one),
// chaos (the long proofs: the fault harness under load and the ledger at the size of a long run)
// and chaos-ha (the harness's short run on replicated servers). `npm test` runs the first four;
// `npm run test:chaos` and `npm run test:chaos-ha` the others, each as its own CI step.
// Integration, e2e and chaos share one global setup that uses the servers the environment names,
// or starts them with scripts/infra.sh.
/**
 * End-to-end files that run two at a time (project e2e-pairs): each drives one idmint through
 * its API or CLI with no fault, load or timing another file could disturb. The rest (outages,
 * failovers, several processes, load, signals) run one at a time in project e2e.
 */
const E2E_IN_PAIRS = [
  'abuse-limits',
  'blocks',
  'bull-board',
  'cli',
  'client',
  'dashboard-hostile-report',
  'dashboard-many-tags',
  'deploy',
  'embedded',
  'formats',
  'hardening',
  'leaf-import',
  'local-buffer',
  'obfuscation-key',
  'refill-dashboard-page',
  'secure',
  'status-page',
]
  .map((name) => `test/e2e/${name}.test.ts`)
  .concat('test/fuzz/**/*.test.ts');

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
          name: 'e2e-pairs',
          sequence: { groupOrder: 2 },
          include: E2E_IN_PAIRS,
          testTimeout: 180_000,
          hookTimeout: 180_000,
          // Two files at once: each drives one server through its API, with no outage, load or
          // failover whose timing another file's processes could disturb (measured on 8 of them:
          // 71 s instead of 119 s).
          maxWorkers: 2,
        },
      },
      {
        test: {
          ...servers,
          name: 'e2e',
          sequence: { groupOrder: 3 },
          include: ['test/e2e/**/*.test.ts', 'test/fuzz/**/*.test.ts'],
          exclude: E2E_IN_PAIRS,
          testTimeout: 180_000,
          hookTimeout: 180_000,
          // Outages, failovers, load and several spawned servers compete for two cores; one file
          // at a time keeps them honest.
          fileParallelism: false,
        },
      },
      {
        test: {
          ...servers,
          name: 'chaos',
          sequence: { groupOrder: 4 },
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
          sequence: { groupOrder: 5 },
          include: ['test/chaos-ha/**/*.test.ts'],
          testTimeout: 900_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
