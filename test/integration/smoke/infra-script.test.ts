import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

// scripts/infra.sh on its own ports and directory: up starts and waits for all four servers,
// a second up reuses them, down leaves no process behind.
const run = promisify(execFile);
const root = fileURLToPath(new URL('../../../', import.meta.url));

// A zombie is gone for our purposes: this machine's init may reap orphans late.
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

describe('smoke: scripts/infra.sh lifecycle', () => {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-infra-'));
  chmodSync(dir, 0o755);
  let env: NodeJS.ProcessEnv = {};
  const infra = (...args: string[]) => run('bash', [join(root, 'scripts/infra.sh'), ...args], { env, cwd: root, timeout: 300_000 });
  const pids = () => ['kafka', 'zookeeper', 'redis', 'postgres'].map((s) => Number(readFileSync(join(dir, 'pids', `${s}.pid`), 'utf8').trim()));

  afterAll(async () => {
    await infra('down').catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  it('comes up, reuses what runs, and goes down without leftovers', async () => {
    const [kafka, controller, zk, redis, pg] = await Promise.all([1, 2, 3, 4, 5].map(() => freePort()));
    env = {
      ...process.env,
      IDMINT_INFRA_DIR: dir,
      IDMINT_INFRA_LIB: join(root, '.infra/lib'),
      IDMINT_INFRA_KAFKA_PORT: String(kafka),
      IDMINT_INFRA_CONTROLLER_PORT: String(controller),
      IDMINT_INFRA_ZK_PORT: String(zk),
      IDMINT_INFRA_REDIS_PORT: String(redis),
      IDMINT_INFRA_PG_PORT: String(pg),
      KAFKA_BROKERS: '',
      ZK_CONNECT: '',
      REDIS_URL: '',
      DATABASE_URL: '',
    };

    await infra('up');
    expect(readFileSync(join(dir, 'env'), 'utf8')).toContain(
      [
        `export KAFKA_BROKERS=127.0.0.1:${kafka}`,
        `export ZK_CONNECT=127.0.0.1:${zk}`,
        `export REDIS_URL=redis://127.0.0.1:${redis}`,
        `export DATABASE_URL=postgres://postgres@127.0.0.1:${pg}/postgres`,
      ].join('\n'),
    );
    const first = pids();
    expect(first.every(alive)).toBe(true);

    const again = await infra('up');
    expect(again.stderr).not.toMatch(/starting/);
    expect(again.stderr.match(/already running/g)).toHaveLength(4);
    expect(pids()).toEqual(first);
    expect((await infra('status')).stdout.match(/ answers /g)).toHaveLength(4);

    await infra('down');
    expect(first.filter(alive)).toEqual([]);
    // status exits 1 when a server is down; every one must be.
    const status = await infra('status').then(
      () => '',
      (err: { stdout: string }) => err.stdout,
    );
    expect(status.match(/ DOWN /g)).toHaveLength(4);
  });
});
