/**
 * How many cases each fuzz property runs: a short run in `npm test`, a long one on demand
 * (`npm run fuzz` sets IDMINT_FUZZ_RUNS=10000). IDMINT_FUZZ_SEED replays a failure.
 */
export const FUZZ_RUNS = Number(process.env.IDMINT_FUZZ_RUNS ?? 300);
export const FUZZ_SEED = process.env.IDMINT_FUZZ_SEED === undefined ? undefined : Number(process.env.IDMINT_FUZZ_SEED);
export const fuzzParameters = { numRuns: FUZZ_RUNS, ...(FUZZ_SEED === undefined ? {} : { seed: FUZZ_SEED }), endOnFailure: true } as const;

/** A stack trace line, which no answer may carry. */
export const STACK_TRACE = /\n\s+at [^\n]+\(|\bat [\w.<>]+ \([^)]*:\d+:\d+\)/;
