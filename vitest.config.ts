import { defineConfig } from 'vitest/config';

// Three projects: unit (pure, fast), integration (real servers), e2e (spawned processes, and
// the fuzzers in test/fuzz, which drive real servers).
// Integration and e2e share one global setup that uses the servers the environment names,
// or starts them with scripts/infra.sh.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          environment: 'node',
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts', 'test/contracts/**/*.test.ts'],
          environment: 'node',
          globalSetup: ['test/setup/global-infra.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts', 'test/fuzz/**/*.test.ts'],
          environment: 'node',
          globalSetup: ['test/setup/global-infra.ts'],
          testTimeout: 180_000,
          hookTimeout: 180_000,
          // Spawned servers compete for two cores; one file at a time keeps them honest.
          fileParallelism: false,
        },
      },
    ],
  },
});
