import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { z } from 'zod';
import { splitPostgresUrl } from '../store/pg-hosts.js';
import { ConfigError } from '../core/errors.js';
import { DEFAULT_STRIPE, regionLayout, type RegionLayout } from '../core/region.js';
import { checkNamespace, kafkaNames } from '../kafka/names.js';
import { KAFKA_DRIVERS } from '../kafka/ports.js';

/**
 * The one config of every process and role: environment variables, validated once with zod,
 * then frozen and passed down. Library code never reads `process.env`. Each variable's default
 * is documented where it is declared; README.md lists them all.
 */

const optionalUrl = (protocols: string[]) =>
  z
    .string()
    .trim()
    .min(1)
    .refine(
      (v) => {
        try {
          return protocols.includes(new URL(v).protocol);
        } catch {
          return false;
        }
      },
      `a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}`,
    )
    .optional();

/** One host, or several in libpq's form (`postgres://u:p@h1:5432,h2:5432/db?target_session_attrs=read-write`). */
const postgresUrl = z
  .string()
  .trim()
  .min(1)
  .superRefine((v, ctx) => {
    try {
      splitPostgresUrl(v);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: `a URL starting with postgres:// or postgresql:// (${(err as Error).message})` });
    }
  })
  .optional();

const hostPortList = z
  .string()
  .trim()
  .regex(/^[^\s,:]+:\d{1,5}(,[^\s,:]+:\d{1,5})*$/, 'a comma-separated list of host:port')
  .optional();

/** A readable file: checked at start so a wrong path is one line, not a TLS error later. */
const pemFile = z
  .string()
  .trim()
  .min(1)
  .refine((path) => {
    try {
      return readFileSync(path, 'utf8').includes('-----BEGIN');
    } catch {
      return false;
    }
  }, 'a readable PEM file')
  .optional();

const name = (pattern: RegExp, what: string) => z.string().trim().regex(pattern, what);
const kafkaName = name(/^[A-Za-z0-9._-]{1,249}$/, 'letters, digits, . _ -');

// Plain decimal digits only: `0x46A6`, `1e4` and ` 18102` are typos, not numbers to guess at.
const int = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d{1,16}$/, `an integer from ${min} to ${max}`)
    .transform(Number)
    .pipe(z.number().int(`an integer from ${min} to ${max}`).min(min, `an integer from ${min} to ${max}`).max(max, `an integer from ${min} to ${max}`));

/** A secret: at least 8 printable characters, no spaces (eight spaces are not a token). */
const secret = z
  .string()
  .regex(/^[\x21-\x7e]{8,}$/, 'at least 8 printable characters without spaces')
  // compose/.env.example's placeholders: a copied example must not serve on a published port.
  .refine((v) => !v.startsWith('change-me'), "a secret of your own, not the example's placeholder (compose/.env)");

export const envSchema = z.object({
  /** HTTP port. Default 8080 (Leaf's). */
  IDMINT_PORT: int(0, 65535).default(8080),
  /** Serving processes on the one port (node's cluster module): a number, or `auto` (one per core). Each is a distinct issuer; more than 1 needs DATABASE_URL. Default 1. */
  IDMINT_PROCESSES: z
    .string()
    .trim()
    .regex(/^(auto|\d{1,3})$/, 'a number from 1 to 256, or auto')
    .transform((v) => (v === 'auto' ? availableParallelism() : Number(v)))
    .pipe(z.number().int().min(1, 'a number from 1 to 256, or auto').max(256, 'a number from 1 to 256, or auto'))
    .default(1),
  /** Set by `idmint serve` for each of its IDMINT_PROCESSES: the process's index. Not for users. */
  IDMINT_PROCESS_INDEX: int(0, 255).optional(),
  /** HTTP bind address. Default loopback; admin routes need a token on any other address. */
  IDMINT_HOST: z.string().trim().min(1).default('127.0.0.1'),
  /** Postgres URL. Unset: embedded PGlite under IDMINT_DATA_DIR. */
  DATABASE_URL: postgresUrl.refine(
    (v) => v === undefined || !/:change-me[^@/]*@/.test(v),
    "a password of your own, not the example's placeholder (POSTGRES_PASSWORD in compose/.env)",
  ),
  /** Postgres schema of idmint's tables (created if missing). Default: the server's search_path. */
  IDMINT_PG_SCHEMA: z
    .string()
    .trim()
    .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'a lower-case SQL identifier')
    .optional(),
  /** Redis URL. Unset: in-memory double buffers instead of Redis pools. With REDIS_SENTINELS: only its scheme, user, password and database count. */
  REDIS_URL: optionalUrl(['redis:', 'rediss:']),
  /** Redis Sentinel, `host:port[,host:port]`: the pools' Redis is the master of REDIS_SENTINEL_NAME, followed through failovers. */
  REDIS_SENTINELS: hostPortList,
  /** The master's name in Sentinel (with REDIS_SENTINELS). */
  REDIS_SENTINEL_NAME: z
    .string()
    .trim()
    .regex(/^[\x21-\x7e]+$/, 'printable characters without spaces')
    .optional(),
  /** The sentinels' own password, if they require one. Never logged. */
  REDIS_SENTINEL_PASSWORD: z
    .string()
    .regex(/^[\x21-\x7e]+$/, 'printable characters without spaces')
    .optional(),
  /** Redis Cluster, `host:port[,host:port]` (some of its nodes; the rest are found): a tag's pool keys share one slot, the refill queue gets a hash-tagged prefix. With REDIS_CLUSTER_NODES: REDIS_URL's scheme, user and password count. */
  REDIS_CLUSTER_NODES: hostPortList,
  /** Kafka brokers, `host:port[,host:port]`. Unset: no Kafka responder or pool topics. */
  KAFKA_BROKERS: hostPortList,
  /** ZooKeeper connect string, `host:port[,host:port]`. Unset: worker id from the local file. */
  ZK_CONNECT: hostPortList,
  /** Local state: PGlite database, worker-id file, clock high-water mark. Default `./data`. */
  IDMINT_DATA_DIR: z.string().trim().min(1).default('./data'),
  /** Bearer token for /v1/biz and /ui. Required unless bound to loopback. */
  IDMINT_ADMIN_TOKEN: secret.optional(),
  /**
   * Bearer token for /metrics on every process (it names every tag with its issued counts, those
   * with tokens or obfuscated formats included). Default none: /metrics is open, as Prometheus expects.
   */
  IDMINT_METRICS_TOKEN: secret.optional(),
  /** bull-board at /ui without its retry, clean, promote and remove buttons (its API refuses them). Default true unless IDMINT_HOST is loopback. */
  IDMINT_UI_READONLY: z.enum(['true', 'false'], { error: 'true or false' }).optional(),
  /** The dashboard at /dashboard: how often every process reports and one API process samples the pools, milliseconds. Default 10000. */
  IDMINT_DASHBOARD_SAMPLE_MS: int(100, 600_000).default(10_000),
  /** How much history the dashboard keeps and draws (in Redis when the deployment has it, else in memory), milliseconds. Default one hour. */
  IDMINT_DASHBOARD_HISTORY_MS: int(60_000, 86_400_000).default(3_600_000),
  /** A Grafana dashboard's address, linked from /dashboard. */
  IDMINT_GRAFANA_URL: optionalUrl(['http:', 'https:']),
  /**
   * `1` starts the OpenTelemetry Node SDK (traces), configured by the standard OTEL_* variables
   * (OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_ENDPOINT...); see docs/tracing.md. Default off.
   */
  IDMINT_OTEL: z.enum(['0', '1'], { error: '0 or 1' }).default('0'),
  /** pino level. Default `info`. */
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** A request's headers and body must arrive within this, milliseconds. Default 10000. */
  IDMINT_HTTP_REQUEST_TIMEOUT_MS: int(100, 600_000).default(10_000),
  /** An idle keep-alive connection is closed after this, milliseconds. Default 5000. */
  IDMINT_HTTP_KEEP_ALIVE_MS: int(100, 600_000).default(5_000),
  /** Open HTTP connections at most; more are refused at accept. Default 10000. */
  IDMINT_HTTP_MAX_CONNECTIONS: int(1, 1_000_000).default(10_000),
  /**
   * IDs' worth of big answers (1,000 IDs and more) worked on per turn of the event loop, so
   * /healthz, /readyz and small requests wait a few ms under any ID load; 0 turns it off (more
   * IDs/s when overloaded, health waiting behind every big request). Default 20000.
   */
  IDMINT_HTTP_SLICE_IDS: int(0, 100_000_000).default(20_000),
  /** Largest `count` per request, up to 100000 (large answers are large bodies). Default 10000. */
  IDMINT_MAX_COUNT: int(1, 100_000).default(10_000),
  /** Largest `count` of a blocks request (`/v1/blocks`, Kafka `"as":"blocks"`); its answer stays small. Default 10000000. */
  IDMINT_MAX_BLOCK_COUNT: int(1, 1_000_000_000_000).default(10_000_000),
  /** IDs an api process keeps in memory from the Redis counter pool beyond a small ask (0: a round trip per request). Default 0. */
  IDMINT_LOCAL_BUFFER: int(0, 1_000_000).default(0),
  /** IDs being served at once across requests, at most; beyond it a request gets a retriable NOT_READY. Default 1000000. */
  IDMINT_MAX_IDS_IN_FLIGHT: int(1, 100_000_000).default(1_000_000),
  /** How long a request for a tag with fallback `error` waits for a short pool to be refilled before POOL_EMPTY. Default 2000. */
  IDMINT_POOL_WAIT_MS: int(0, 60_000).default(2000),
  /** How long a process trusts a tag's settings before reloading them; changes made elsewhere reach it within this. Default 1000. */
  IDMINT_TAG_CACHE_MS: int(0, 600_000).default(1000),
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
  /** Partitions of a Kafka pool topic `idmint.ids.<tag>`: the most SDK instances that read one tag's pool at once (more use their fallback). Raised on existing topics. Default 16. */
  IDMINT_KAFKA_POOL_PARTITIONS: int(1, 10_000).default(16),
  /** Replication factor of the topics idmint creates (min.insync.replicas one fewer, at least 1). Default min(3, brokers in the cluster). */
  IDMINT_KAFKA_REPLICATION_FACTOR: int(1, 32).optional(),
  /** Refused: the shared HMAC key of earlier releases, replaced by the deployment's Ed25519 signing key (IDMINT_SIGNING_KEY, or the record's). Unset it. */
  IDMINT_POOL_BLOCK_KEY: z.string().optional(),
  /** The Ed25519 secret key this process signs Kafka pool blocks and replies with (`idmint keys generate`); unset, the deployment record's key (generated by the first process that signs). The same on every signing process. Never logged. */
  IDMINT_SIGNING_KEY: z
    .string()
    .regex(/^ed25519-secret:[A-Za-z0-9_-]{43}$/, 'an Ed25519 secret key "ed25519-secret:<base64url>" (make one with `idmint keys generate`)')
    .optional(),
  /** How often the refill reads Kafka pool topics' committed offsets (demand, threshold refills), milliseconds. Default 1000. */
  IDMINT_KAFKA_POOL_WATCH_MS: int(100, 60_000).default(1000),
  /** App number embedded in sharded-mode IDs (8 bits). Default 0. */
  IDMINT_APP_ID: int(0, 255).default(0),
  /** When set, `GET /v1/ids` requires `gatePass=<this>` (Tinyid's token). */
  IDMINT_GATE_PASS: z
    .string()
    .regex(/^[\x21-\x7e]+$/, 'printable characters without spaces')
    .optional(),
  /** How many regions the ID space is split for (README "Several regions"); recorded in the region's Postgres at the first start, fixed after. Unset or 1: one region. */
  IDMINT_REGIONS: int(1, 64).optional(),
  /** This deployment's region, 0 … IDMINT_REGIONS − 1. */
  IDMINT_REGION: int(0, 63).optional(),
  /** IDs per stripe of a segment tag's number line; regions take turns stripe by stripe. Default 1,000,000. */
  IDMINT_REGION_STRIPE: int(1, 140_737_488_355_327).optional(),
  /** Static worker id (skips ZooKeeper and the file). */
  IDMINT_WORKER_ID: int(0, 4_194_303).optional(),
  /** Secret key of the obfuscated ID formats (at least 16 characters); the same on every process. Never logged. */
  IDMINT_OBFUSCATION_KEY: z
    .string()
    .regex(/^[\x21-\x7e]{16,}$/, 'at least 16 printable characters without spaces')
    .optional(),
  /** How often a process reads the deployment record again to check it still agrees (a pushed change is read at once), milliseconds. Default 5000. */
  IDMINT_DEPLOYMENT_CHECK_MS: int(100, 600_000).default(5000),
  /** The fence against a rewound segment counter: auto (ZooKeeper when ZK_CONNECT and DATABASE_URL are set), zookeeper, off. Default auto. */
  IDMINT_SEGMENT_FENCE: z.enum(['auto', 'zookeeper', 'off']).default('auto'),
  /** Where Snowflake worker ids come from: auto (ZooKeeper if ZK_CONNECT, else Postgres if DATABASE_URL, else the file), zookeeper, postgres, redis (these three lease ids and reclaim them), file. Default auto. */
  IDMINT_WORKER_ID_PROVIDER: z.enum(['auto', 'zookeeper', 'postgres', 'redis', 'file']).default('auto'),
  /**
   * The worker id this process prefers (Kubernetes: a StatefulSet pod's ordinal, from the label
   * `apps.kubernetes.io/pod-index` through the downward API), or `hostname` for the number that ends
   * the host name (`idmint-api-2` → 2). Still held by a lease in the registry (zookeeper, postgres,
   * redis): while a process with the same identity holds it, a start waits IDMINT_WORKER_ID_WAIT_MS
   * for that lease to expire; held by another identity, another id is taken. With IDMINT_PROCESSES
   * = n, process i prefers ordinal × n + i. Default none: any free id.
   */
  IDMINT_WORKER_ID_ORDINAL: z
    .string()
    .trim()
    .regex(/^(\d{1,7}|hostname)$/, 'a non-negative integer, or hostname')
    .optional(),
  /** How long a worker-id lease lives unrenewed: Postgres and Redis leases, the ZooKeeper session (ZooKeeper may cap it: maxSessionTimeout). A holder stops issuing 1 s before: the Snowflake fallback outlives a registry outage this long. Default 30000. */
  IDMINT_WORKER_ID_LEASE_MS: int(2000, 300_000).default(30_000),
  /** How long a start waits for its preferred id (IDMINT_WORKER_ID_ORDINAL) while a process with its identity still holds it. Default 60000. */
  IDMINT_WORKER_ID_WAIT_MS: int(0, 3_600_000).default(60_000),
  /** The address this process advertises for its ZooKeeper worker node. Default IDMINT_HOST:IDMINT_PORT. */
  IDMINT_ADVERTISE: z
    .string()
    .trim()
    .regex(/^[^\s:#]+:\d{1,5}(#\d{1,3})?$/, 'host:port')
    .optional(),

  // Abuse limits on the routes that hand out IDs (per process; 0 = off).
  /** Requests per window one client (IP address) may make. Default 0 (unlimited). */
  IDMINT_RATE_LIMIT_CLIENT: int(0, 100_000_000).default(0),
  /** Requests per window for one tag, all clients together. Default 0 (unlimited). */
  IDMINT_RATE_LIMIT_TAG: int(0, 100_000_000).default(0),
  /** Rate-limit window, milliseconds. Default 1000. */
  IDMINT_RATE_LIMIT_WINDOW_MS: int(100, 3_600_000).default(1000),
  /** Warn (metric idmint_tag_days_left, alert, log) when a tag with maxLimit runs out within this many days at the current rate. Default 30. */
  IDMINT_EXHAUSTION_WARN_DAYS: int(1, 36_500).default(30),

  // Refills (the refill role and the API's refill trigger).
  /** BullMQ queue name. Default `idmint-refill`. */
  IDMINT_REFILL_QUEUE: name(/^[A-Za-z0-9._-]{1,100}$/, 'letters, digits, . _ -').default('idmint-refill'),
  /** BullMQ key prefix. Default `bull`. */
  IDMINT_REFILL_PREFIX: name(/^[A-Za-z0-9._-]{1,100}$/, 'letters, digits, . _ -').default('bull'),
  /** Prepended to pool keys, e.g. `staging:`. Default none. */
  IDMINT_POOL_KEY_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9._:-]{0,100}$/, 'letters, digits, . _ : -')
    .default(''),
  /** Smallest pool target depth. Default 1000. */
  IDMINT_POOL_MIN_DEPTH: int(1, 100_000_000).default(1000),
  /** Largest pool target depth. Default 1,000,000. */
  IDMINT_POOL_MAX_DEPTH: int(1, 100_000_000).default(1_000_000),
  /** Largest target depth of a Redis counter pool (ranges: no memory per ID, only the gap a flush leaves). Default 50,000,000. */
  IDMINT_POOL_MAX_RANGE_DEPTH: int(1, 1_000_000_000).default(50_000_000),
  /** Refill jobs one worker runs at once. Default 2. */
  IDMINT_REFILL_CONCURRENCY: int(1, 64).default(2),
  /** Job lock: a worker silent this long is presumed dead and its job retried. Default 30000. */
  IDMINT_REFILL_LOCK_MS: int(100, 600_000).default(30_000),

  // The Kafka responder.
  /** Roles that need Kafka topics create the missing ones at start; `false` refuses instead, naming `idmint kafka init`. Default true. */
  IDMINT_KAFKA_CREATE_TOPICS: z.enum(['true', 'false'], { error: 'true or false' }).default('true'),
  /** retention.ms of a request topic created at start or by `idmint kafka init`. Default 3600000 (requests are answered in seconds). */
  IDMINT_KAFKA_REQUEST_RETENTION_MS: int(60_000, 31_536_000_000).default(3_600_000),
  /**
   * This deployment's names on a Kafka cluster it shares with another (a second region, a staging
   * copy): `eu` gives `idmint.eu.requests`, `idmint.eu.responders`, pool topics `idmint.eu.ids.<tag>`
   * and groups `idmint.eu.pool.<tag>`; SDKs take the same `namespace`. Default none: `idmint.*`.
   */
  IDMINT_KAFKA_NAMESPACE: z
    .string()
    .trim()
    .superRefine((v, ctx) => {
      try {
        checkNamespace(v);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
      }
    })
    .optional(),
  /** Request topic. Default `idmint.requests` (`idmint.<namespace>.requests` with IDMINT_KAFKA_NAMESPACE). */
  IDMINT_KAFKA_REQUEST_TOPIC: kafkaName.optional(),
  /** Responder consumer group. Default `idmint.responders` (`idmint.<namespace>.responders` with IDMINT_KAFKA_NAMESPACE). */
  IDMINT_KAFKA_RESPONDER_GROUP: kafkaName.optional(),
  /**
   * Responder group session timeout, ms: how soon a crashed responder's partitions move, and how
   * long request/reply waits after Kafka restarts (the group's members from before expire first).
   * Default 10000 (broker minimum 6000).
   */
  IDMINT_KAFKA_SESSION_TIMEOUT_MS: int(1000, 3_600_000).default(10_000),

  /** The Kafka client library behind idmint's Kafka ports (src/kafka/ports.ts). Default kafkajs, the only one so far. */
  IDMINT_KAFKA_DRIVER: z.enum(KAFKA_DRIVERS, { error: KAFKA_DRIVERS.join(' or ') }).default('kafkajs'),

  // Secured connections (README, "Secured connections"). Postgres takes its TLS settings in DATABASE_URL.
  /** CA certificate (PEM file) that signed Redis's certificate, for `rediss://` URLs. Default: the system's CAs. */
  IDMINT_REDIS_TLS_CA: pemFile,
  /** Connect to Kafka over TLS. Default false, true when IDMINT_KAFKA_TLS_CA is set. */
  IDMINT_KAFKA_TLS: z.enum(['true', 'false'], { error: 'true or false' }).optional(),
  /** CA certificate (PEM file) that signed the brokers' certificates. Default: the system's CAs. */
  IDMINT_KAFKA_TLS_CA: pemFile,
  /** Kafka SASL mechanism: plain, scram-sha-256 or scram-sha-512. Default none. */
  IDMINT_KAFKA_SASL_MECHANISM: z.enum(['plain', 'scram-sha-256', 'scram-sha-512'], { error: 'plain, scram-sha-256 or scram-sha-512' }).optional(),
  /** Kafka SASL user, with IDMINT_KAFKA_SASL_MECHANISM. */
  IDMINT_KAFKA_SASL_USERNAME: z
    .string()
    .regex(/^[\x21-\x7e]+$/, 'printable characters without spaces')
    .optional(),
  /** Kafka SASL password. Never logged. */
  IDMINT_KAFKA_SASL_PASSWORD: z
    .string()
    .regex(/^[\x21-\x7e]+$/, 'printable characters without spaces')
    .optional(),
  /** ZooKeeper digest credentials `user:password`: idmint's nodes get ACLs only this identity may change. Never logged. */
  IDMINT_ZK_AUTH: z
    .string()
    .regex(/^[^:\s]+:[\x21-\x7e]+$/, 'user:password')
    .optional(),
});

/** The settings; the request topic and responder group always named (their defaults follow IDMINT_KAFKA_NAMESPACE). */
export type Config = Readonly<z.infer<typeof envSchema> & { IDMINT_KAFKA_REQUEST_TOPIC: string; IDMINT_KAFKA_RESPONDER_GROUP: string }>;

/**
 * Parses the environment. A bad value throws one ConfigError (CONFIG_INVALID) whose message names each
 * variable at fault and what it expects; entry points print it as one line and exit 1.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = parseEnv(envSchema, env);
  const names = kafkaNames(parsed.IDMINT_KAFKA_NAMESPACE);
  const config: Config = Object.freeze({
    ...parsed,
    IDMINT_KAFKA_REQUEST_TOPIC: parsed.IDMINT_KAFKA_REQUEST_TOPIC ?? names.requestTopic,
    IDMINT_KAFKA_RESPONDER_GROUP: parsed.IDMINT_KAFKA_RESPONDER_GROUP ?? names.responderGroup,
  });
  if (config.IDMINT_POOL_MIN_DEPTH > config.IDMINT_POOL_MAX_DEPTH) {
    throw new ConfigError('invalid configuration: IDMINT_POOL_MIN_DEPTH must not exceed IDMINT_POOL_MAX_DEPTH');
  }
  if (config.IDMINT_POOL_MIN_DEPTH > config.IDMINT_POOL_MAX_RANGE_DEPTH) {
    throw new ConfigError('invalid configuration: IDMINT_POOL_MIN_DEPTH must not exceed IDMINT_POOL_MAX_RANGE_DEPTH');
  }
  if (config.IDMINT_PROCESSES > 1 && !config.DATABASE_URL) {
    throw new ConfigError(
      'invalid configuration: IDMINT_PROCESSES > 1 needs DATABASE_URL (the embedded database has one owner; run one process, or use Postgres)',
    );
  }
  if (config.IDMINT_PROCESSES > 1 && config.IDMINT_WORKER_ID !== undefined && config.IDMINT_PROCESS_INDEX === undefined) {
    // Every forked process would inherit the one id: two Snowflake generators with one worker id repeat IDs.
    throw new ConfigError(
      'invalid configuration: IDMINT_WORKER_ID gives one worker id, and IDMINT_PROCESSES > 1 would give it to every process (their Snowflake IDs would repeat); unset IDMINT_WORKER_ID (each process then registers its own) or run one process per worker id',
    );
  }
  if ((config.REDIS_SENTINELS === undefined) !== (config.REDIS_SENTINEL_NAME === undefined)) {
    throw new ConfigError('invalid configuration: REDIS_SENTINELS and REDIS_SENTINEL_NAME go together (the sentinels, and the name of the master they watch)');
  }
  if (config.REDIS_CLUSTER_NODES !== undefined && config.REDIS_SENTINELS !== undefined) {
    throw new ConfigError('invalid configuration: REDIS_CLUSTER_NODES and REDIS_SENTINELS name two different kinds of Redis; set the one you run');
  }
  if (config.REDIS_CLUSTER_NODES !== undefined && config.REDIS_URL !== undefined && !['', '/', '/0'].includes(new URL(config.REDIS_URL).pathname)) {
    throw new ConfigError(
      'invalid configuration: a Redis Cluster has database 0 only; leave the database out of REDIS_URL (it gives only the scheme, user and password with REDIS_CLUSTER_NODES)',
    );
  }
  regionOf(config);
  if (config.IDMINT_POOL_BLOCK_KEY !== undefined) {
    throw new ConfigError(
      'invalid configuration: IDMINT_POOL_BLOCK_KEY (a key shared with every consumer, which could sign blocks of its own) is replaced by the deployment\'s Ed25519 signing key: unset it, and give SDKs the public key `idmint keys public` prints (verifyKey / IDMINT_VERIFY_KEY) in place of blockKey (README "Kafka API")',
    );
  }
  const sasl = [config.IDMINT_KAFKA_SASL_MECHANISM, config.IDMINT_KAFKA_SASL_USERNAME, config.IDMINT_KAFKA_SASL_PASSWORD];
  if (sasl.some((v) => v !== undefined) && !sasl.every((v) => v !== undefined)) {
    throw new ConfigError('invalid configuration: IDMINT_KAFKA_SASL_MECHANISM, IDMINT_KAFKA_SASL_USERNAME and IDMINT_KAFKA_SASL_PASSWORD go together');
  }
  return config;
}

/** The region layout the settings name, or undefined for one region (IDMINT_REGIONS unset or 1). */
export function regionOf(config: Pick<Config, 'IDMINT_REGIONS' | 'IDMINT_REGION' | 'IDMINT_REGION_STRIPE'>): RegionLayout | undefined {
  const { IDMINT_REGIONS: regions, IDMINT_REGION: region, IDMINT_REGION_STRIPE: stripe } = config;
  if (regions === undefined || regions === 1) {
    if ((region ?? 0) !== 0 || stripe !== undefined)
      throw new ConfigError(
        'invalid configuration: IDMINT_REGION and IDMINT_REGION_STRIPE need IDMINT_REGIONS (how many regions the ID space is split for, 2 to 64)',
      );
    return undefined;
  }
  if (region === undefined)
    throw new ConfigError(`invalid configuration: IDMINT_REGIONS=${regions} needs IDMINT_REGION (this deployment's number, 0 to ${regions - 1})`);
  try {
    return regionLayout(regions, region, stripe ?? DEFAULT_STRIPE);
  } catch (err) {
    const name = { regions: 'IDMINT_REGIONS', region: 'IDMINT_REGION', stripe: 'IDMINT_REGION_STRIPE' }[(err as ConfigError).field ?? 'region'];
    throw new ConfigError(`invalid configuration: ${name}: ${(err as Error).message}`);
  }
}

/**
 * Validates environment variables against a zod object schema and freezes the result. Empty
 * strings count as unset (`FOO= npm start` is how people clear a variable).
 */
export function parseEnv<T extends z.ZodType>(schema: T, env: NodeJS.ProcessEnv = process.env): Readonly<z.infer<T>> {
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = schema.safeParse(cleaned);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message.startsWith('Invalid') ? i.message : `expected ${i.message}`}`);
    throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  }
  return Object.freeze(parsed.data);
}

/** The HTTP server's connection limits from the config. */
export function connectionLimits(config: Config): { requestTimeoutMs: number; keepAliveTimeoutMs: number; maxConnections: number } {
  return {
    requestTimeoutMs: config.IDMINT_HTTP_REQUEST_TIMEOUT_MS,
    keepAliveTimeoutMs: config.IDMINT_HTTP_KEEP_ALIVE_MS,
    maxConnections: config.IDMINT_HTTP_MAX_CONNECTIONS,
  };
}
