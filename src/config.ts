import { z } from 'zod';
import { IdmintError } from './core/errors.js';

/**
 * One config module: environment variables, validated once with zod, then frozen.
 * Each variable's default is documented where it is declared; README.md lists them all.
 */

const optionalUrl = (protocols: string[]) =>
  z
    .string()
    .trim()
    .min(1)
    .refine((v) => {
      try {
        return protocols.includes(new URL(v).protocol);
      } catch {
        return false;
      }
    }, `a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}`)
    .optional();

const hostPortList = z
  .string()
  .trim()
  .regex(/^[^\s,:]+:\d{1,5}(,[^\s,:]+:\d{1,5})*$/, 'a comma-separated list of host:port')
  .optional();

const int = (min: number, max: number) =>
  z.coerce
    .number({ error: `an integer from ${min} to ${max}` })
    .int(`an integer from ${min} to ${max}`)
    .min(min, `an integer from ${min} to ${max}`)
    .max(max, `an integer from ${min} to ${max}`);

export const envSchema = z.object({
  /** HTTP port. Default 8080 (Leaf's). */
  IDMINT_PORT: int(0, 65535).default(8080),
  /** HTTP bind address. Default loopback; admin routes need a token on any other address. */
  IDMINT_HOST: z.string().trim().min(1).default('127.0.0.1'),
  /** Postgres URL. Unset: embedded PGlite under IDMINT_DATA_DIR. */
  DATABASE_URL: optionalUrl(['postgres:', 'postgresql:']),
  /** Postgres schema of idmint's tables (created if missing). Default: the server's search_path. */
  IDMINT_PG_SCHEMA: z.string().trim().regex(/^[a-z_][a-z0-9_]{0,62}$/, 'a lower-case SQL identifier').optional(),
  /** Redis URL. Unset: in-memory double buffers instead of Redis pools. */
  REDIS_URL: optionalUrl(['redis:', 'rediss:']),
  /** Kafka brokers, `host:port[,host:port]`. Unset: no Kafka responder or pool topics. */
  KAFKA_BROKERS: hostPortList,
  /** ZooKeeper connect string, `host:port[,host:port]`. Unset: worker id from the local file. */
  ZK_CONNECT: hostPortList,
  /** Local state: PGlite database, worker-id file, clock high-water mark. Default `./data`. */
  IDMINT_DATA_DIR: z.string().trim().min(1).default('./data'),
  /** Bearer token for /v1/biz and /ui. Required unless bound to loopback. */
  IDMINT_ADMIN_TOKEN: z.string().min(8, 'at least 8 characters').optional(),
  /** pino level. Default `info`. */
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Largest `count` per request. Default 10000. */
  IDMINT_MAX_COUNT: int(1, 1_000_000).default(10_000),
  /** Roles `idmint serve` runs, comma-separated from api,refill,responder. Default all that the config allows. */
  IDMINT_ROLES: z
    .string()
    .trim()
    .regex(/^(api|refill|responder)(,(api|refill|responder))*$/, 'a comma-separated list from api, refill, responder')
    .optional(),
  /** Cron sweep interval for pool refills, milliseconds. Default 30000. */
  IDMINT_REFILL_EVERY_MS: int(1000, 86_400_000).default(30_000),
  /** Seconds a Redis pool should last at the observed rate. Default 60. */
  IDMINT_POOL_SECONDS: int(1, 86_400).default(60),
  /** Kafka request topic partitions, used by `idmint kafka init`. Default 4. */
  IDMINT_KAFKA_PARTITIONS: int(1, 1000).default(4),
  /** App number embedded in sharded-mode IDs (8 bits). Default 0. */
  IDMINT_APP_ID: int(0, 255).default(0),
  /** When set, `GET /v1/ids` requires `gatePass=<this>` (Tinyid's token). */
  IDMINT_GATE_PASS: z.string().min(1).optional(),
  /** Static worker id (skips ZooKeeper and the file). */
  IDMINT_WORKER_ID: int(0, 4_194_303).optional(),
  /** The address this process advertises for its ZooKeeper worker node. Default IDMINT_HOST:IDMINT_PORT. */
  IDMINT_ADVERTISE: z
    .string()
    .trim()
    .regex(/^[^\s:]+:\d{1,5}$/, 'host:port')
    .optional(),
});

export type Config = Readonly<z.infer<typeof envSchema>>;

/**
 * Parses the environment. A bad value throws one IdmintError whose message names each
 * variable at fault and what it expects; entry points print it as one line and exit 1.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  return parseEnv(envSchema, env);
}

/**
 * Validates environment variables against a zod object schema and freezes the result. Empty
 * strings count as unset (`FOO= npm start` is how people clear a variable). Modules with their
 * own variables (refills, the responder) parse them with this too.
 */
export function parseEnv<T extends z.ZodType>(schema: T, env: NodeJS.ProcessEnv = process.env): Readonly<z.infer<T>> {
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = schema.safeParse(cleaned);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message.startsWith('Invalid') ? i.message : `expected ${i.message}`}`);
    throw new IdmintError('BAD_REQUEST', `invalid configuration: ${problems.join('; ')}`);
  }
  return Object.freeze(parsed.data);
}
