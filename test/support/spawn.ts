import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { freePort } from './ports.js';
import { until, untilValue } from './poll.js';
import { TEST_SIGNING_SECRET } from './signing.js';

export { freePort };

const BIN = fileURLToPath(new URL('../../bin/idmint.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface SpawnedServer {
  readonly url: string;
  readonly child: ChildProcess;
  /** Everything the process wrote, for assertions and for failure messages. */
  output(): string;
  /** Sends a signal and waits for the exit; resolves with the exit code (null when killed). */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * The servers the test harness exports are not inherited: a spawned server is embedded unless
 * the test names servers in `env` (empty strings count as unset).
 */
const NO_SERVERS = { DATABASE_URL: '', REDIS_URL: '', KAFKA_BROKERS: '', ZK_CONNECT: '' };
/** What a spawned server signs Kafka blocks and replies with, unless the test says otherwise: the key the tests' SDK readers verify with. */
const TEST_KEYS = { IDMINT_SIGNING_KEY: TEST_SIGNING_SECRET };

/**
 * Spawns `idmint serve` as a user would (or `options.worker`, a file under workers/) and waits
 * until /healthz answers.
 */
export async function spawnServer(env: Record<string, string>, options: { timeoutMs?: number; worker?: string } = {}): Promise<SpawnedServer> {
  const port = env.IDMINT_PORT ? Number(env.IDMINT_PORT) : await freePort();
  const args = options.worker ? ['--import', 'tsx', `workers/${options.worker}`] : [BIN, 'serve'];
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'info', ...NO_SERVERS, ...TEST_KEYS, ...env, IDMINT_PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  const exitedEarly = (): boolean => child.exitCode !== null || child.signalCode !== null;
  try {
    await until(
      `${url}/healthz`,
      async () => {
        if (exitedEarly()) throw new Error(`idmint serve exited early:\n${output}`);
        return fetch(`${url}/healthz`).then(
          (r) => r.ok,
          () => false,
        );
      },
      { timeoutMs: options.timeoutMs ?? 60_000, intervalMs: 100, detail: () => output },
    );
  } catch (err) {
    if (!exitedEarly()) child.kill('SIGKILL');
    throw err;
  }
  return {
    url,
    child,
    output: () => output,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      return exited;
    },
  };
}

/**
 * Runs `idmint serve` expecting it to stop by itself (a start-up refusal); resolves with its exit
 * code and output. A process still running after `timeoutMs` is killed and the code is null.
 */
export async function runUntilExit(env: Record<string, string>, timeoutMs = 30_000): Promise<{ code: number | null; output: string }> {
  const port = await freePort();
  const child = spawn(process.execPath, [BIN, 'serve'], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'info', ...NO_SERVERS, ...TEST_KEYS, ...env, IDMINT_PORT: env.IDMINT_PORT ?? String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  clearTimeout(timer);
  return { code, output };
}

export interface ReadyReport {
  status: string;
  checks: Record<string, { ok: boolean; message?: string }>;
}

/** Polls a server's /readyz until it says `status` (default `ready`); returns that report. */
export async function untilReady(url: string, options: { status?: string; timeoutMs?: number; output?: () => string } = {}): Promise<ReadyReport> {
  const want = options.status ?? 'ready';
  return untilValue(
    `${url}/readyz to say ${want}`,
    async (): Promise<ReadyReport | undefined> =>
      fetch(`${url}/readyz`).then(
        (r) => r.json() as Promise<ReadyReport>,
        () => undefined,
      ),
    (report) => report?.status === want,
    { ...(options.timeoutMs ? { timeoutMs: options.timeoutMs } : {}), ...(options.output ? { detail: options.output } : {}) },
  ) as Promise<ReadyReport>;
}
