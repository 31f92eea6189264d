import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { freePort } from './ports.js';

/**
 * A private server for fault tests: its own port and state directory, started by
 * scripts/infra.sh, so a test can kill, pause or restart it without disturbing the shared
 * servers other test files use in parallel.
 *
 *   const redis = await startPrivateServer('redis');
 *   await redis.kill();    // SIGKILL: Redis has no persistence, so its data is gone
 *   await redis.start();   // waits until it answers again
 *   await redis.close();   // in afterAll
 */

export type ServerName = 'redis' | 'kafka' | 'zookeeper' | 'postgres';
export type ServerAction = 'start' | 'stop' | 'kill' | 'restart' | 'pause' | 'resume';

export interface PrivateServer {
  readonly name: ServerName;
  /** What the matching env var would hold: REDIS_URL, KAFKA_BROKERS, ZK_CONNECT or DATABASE_URL. */
  readonly url: string;
  /** The state directory under the OS temp dir (logs in `<dir>/logs`). */
  readonly dir: string;
  /** Graceful stop (SIGTERM, `pg_ctl stop -m fast`). */
  stop(): Promise<void>;
  /** Crash: SIGKILL (Postgres: `pg_ctl stop -m immediate`). */
  kill(): Promise<void>;
  /** Start again and wait until it answers. */
  start(): Promise<void>;
  restart(): Promise<void>;
  /** SIGSTOP: the port stays open and nothing answers, like a hung server. Not for Postgres. */
  pause(): Promise<void>;
  resume(): Promise<void>;
  pid(): Promise<number>;
  /** Stop it and delete its directory. Idempotent. */
  close(): Promise<void>;
}

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../', import.meta.url));
const script = join(root, 'scripts/infra.sh');

const ENV_VAR: Record<ServerName, string> = {
  redis: 'REDIS_URL',
  kafka: 'KAFKA_BROKERS',
  zookeeper: 'ZK_CONNECT',
  postgres: 'DATABASE_URL',
};

export async function startPrivateServer(name: ServerName): Promise<PrivateServer> {
  const dir = mkdtempSync(join(tmpdir(), `idmint-${name}-`));
  // Postgres runs as the postgres user when we are root: it must reach its data dir.
  chmodSync(dir, 0o755);
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    IDMINT_INFRA_DIR: dir,
    // Share the project's jar cache: no second Maven download per instance.
    IDMINT_INFRA_LIB: join(root, '.infra/lib'),
    IDMINT_INFRA_REDIS_PORT: String(port),
    IDMINT_INFRA_ZK_PORT: String(port),
    IDMINT_INFRA_PG_PORT: String(port),
    IDMINT_INFRA_KAFKA_PORT: String(port),
    IDMINT_INFRA_CONTROLLER_PORT: String(name === 'kafka' ? await freePort() : 0),
  };
  // The shared server's variable would make infra.sh treat ours as external.
  delete env[ENV_VAR[name]];
  const url = {
    redis: `redis://127.0.0.1:${port}`,
    kafka: `127.0.0.1:${port}`,
    zookeeper: `127.0.0.1:${port}`,
    postgres: `postgres://postgres@127.0.0.1:${port}/postgres`,
  }[name];

  const ctl = async (action: ServerAction | 'pid' | 'down'): Promise<string> => {
    try {
      const { stdout } = await run('bash', [script, action, ...(action === 'down' ? [] : [name])], {
        env,
        cwd: root,
        timeout: 180_000,
      });
      return stdout.trim();
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new Error(`infra.sh ${action} ${name} failed: ${e.stderr?.trim() || e.message}`, { cause: err });
    }
  };

  let closed = false;
  const server: PrivateServer = {
    name,
    url,
    dir,
    stop: async () => void (await ctl('stop')),
    kill: async () => void (await ctl('kill')),
    start: async () => void (await ctl('start')),
    restart: async () => void (await ctl('restart')),
    pause: async () => void (await ctl('pause')),
    resume: async () => void (await ctl('resume')),
    pid: async () => Number(await ctl('pid')),
    close: async () => {
      if (closed) return;
      closed = true;
      try {
        await ctl('down');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
  try {
    await server.start();
  } catch (err) {
    await server.close().catch(() => undefined);
    throw err;
  }
  return server;
}
