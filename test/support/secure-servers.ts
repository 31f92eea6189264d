import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { freePort } from './ports.js';

/**
 * The four servers in scripts/infra.sh's secured profile, private to one test file: Kafka on
 * SASL_SSL (SCRAM-SHA-512), Redis on TLS with an ACL user, Postgres on TLS with scram
 * passwords, ZooKeeper (digest ACLs need nothing on the server), a throwaway CA in `<dir>/tls`.
 * `env` holds what idmint needs to reach them, as `<dir>/env` lists it.
 */
export interface SecureInfra {
  readonly dir: string;
  readonly env: Readonly<Record<string, string>>;
  readonly password: string;
  close(): Promise<void>;
}

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../', import.meta.url));

export async function startSecureInfra(): Promise<SecureInfra> {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-secure-'));
  chmodSync(dir, 0o755); // Postgres runs as the postgres user when we are root
  const password = 'secured-profile-pw';
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    IDMINT_INFRA_SECURE: '1',
    IDMINT_INFRA_PASSWORD: password,
    IDMINT_INFRA_DIR: dir,
    IDMINT_INFRA_LIB: join(root, '.infra/lib'),
    IDMINT_INFRA_REDIS_PORT: String(await freePort()),
    IDMINT_INFRA_ZK_PORT: String(await freePort()),
    IDMINT_INFRA_PG_PORT: String(await freePort()),
    IDMINT_INFRA_KAFKA_PORT: String(await freePort()),
    IDMINT_INFRA_CONTROLLER_PORT: String(await freePort()),
  };
  // The shared servers' variables would make infra.sh treat ours as external.
  for (const name of ['REDIS_URL', 'DATABASE_URL', 'KAFKA_BROKERS', 'ZK_CONNECT']) delete env[name];
  const infra = (command: string) => run('bash', [join(root, 'scripts/infra.sh'), command], { env, cwd: root, timeout: 180_000 });
  const close = async (): Promise<void> => {
    try {
      await infra('down');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  try {
    await infra('up');
  } catch (err) {
    await close().catch(() => undefined);
    const e = err as { stderr?: string; message: string };
    throw new Error(`infra.sh up (secured) failed: ${e.stderr?.trim() || e.message}`, { cause: err });
  }
  const vars = Object.fromEntries(
    readFileSync(join(dir, 'env'), 'utf8')
      .split('\n')
      .map((line) => /^export (\w+)=(.*)$/.exec(line))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => [m[1]!, m[2]!]),
  );
  return { dir, env: vars, password, close };
}
