import { z } from 'zod';
import { parseEnv } from '../config.js';
import { IdmintError } from '../core/errors.js';

/**
 * Refill tuning from the environment, beside the main config (src/config.ts holds
 * IDMINT_REFILL_EVERY_MS and IDMINT_POOL_SECONDS). Validated once, then frozen.
 */
const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

export const refillEnvSchema = z.object({
  /** BullMQ queue name. Default `idmint-refill`. */
  IDMINT_REFILL_QUEUE: z.string().trim().regex(/^[A-Za-z0-9._-]{1,100}$/, 'letters, digits, . _ -').default('idmint-refill'),
  /** BullMQ key prefix. Default `bull`. */
  IDMINT_REFILL_PREFIX: z.string().trim().regex(/^[A-Za-z0-9._-]{1,100}$/, 'letters, digits, . _ -').default('bull'),
  /** Prepended to pool keys, e.g. `staging:`. Default none. */
  IDMINT_POOL_KEY_PREFIX: z.string().regex(/^[A-Za-z0-9._:-]{0,100}$/, 'letters, digits, . _ : -').default(''),
  /** Smallest pool target depth. Default 1000. */
  IDMINT_POOL_MIN_DEPTH: int(1, 100_000_000).default(1000),
  /** Largest pool target depth. Default 1,000,000. */
  IDMINT_POOL_MAX_DEPTH: int(1, 100_000_000).default(1_000_000),
  /** Refill jobs one worker runs at once. Default 2. */
  IDMINT_REFILL_CONCURRENCY: int(1, 64).default(2),
  /** Job lock: a worker silent this long is presumed dead and its job retried. Default 30000. */
  IDMINT_REFILL_LOCK_MS: int(100, 600_000).default(30_000),
  /** Crash-test hook: milliseconds to wait between taking a segment and pushing it. Default 0. */
  IDMINT_REFILL_PAUSE_AFTER_ALLOCATE_MS: int(0, 3_600_000).default(0),
});

export type RefillEnv = Readonly<z.infer<typeof refillEnvSchema>>;

export function loadRefillEnv(env: NodeJS.ProcessEnv = process.env): RefillEnv {
  const parsed = parseEnv(refillEnvSchema, env);
  if (parsed.IDMINT_POOL_MIN_DEPTH > parsed.IDMINT_POOL_MAX_DEPTH) {
    throw new IdmintError('BAD_REQUEST', 'invalid configuration: IDMINT_POOL_MIN_DEPTH must not exceed IDMINT_POOL_MAX_DEPTH');
  }
  return parsed;
}
