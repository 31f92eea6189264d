import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../support/ports.js';

// scripts/infra.sh with IDMINT_INFRA_PG_HA=1 in a directory of its own (IDMINT_INFRA_DIR), driven
// as an operator does: scripts/pg-ha.sh finds the cluster there, a kill that finds nothing says
// so, and `down` run from a shell that sourced the env leaves no process behind.
const run = promisify(execFile);
const root = fileURLToPath(new URL('../../../', import.meta.url));
const script = (name: string) => join(root, 'scripts', name);

/** Pids of live processes whose command line mentions `text` (zombies excluded). */
function processesMentioning(text: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z') continue;
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ').includes(text)) found.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** The variables of an env file written by infra.sh up, as `source` would set them. */
function sourced(file: string): Record<string, string> {
  return Object.fromEntries([...readFileSync(file, 'utf8').matchAll(/^export (\w+)=(.*)$/gm)].map((m) => [m[1]!, m[2]!]));
}

describe('smoke: infra.sh with the Patroni profile in its own IDMINT_INFRA_DIR', () => {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-infra-pg-ha-'));
  chmodSync(dir, 0o755);
  let env: NodeJS.ProcessEnv = {};
  const bash = (file: string, args: string[], extra: NodeJS.ProcessEnv = {}) =>
    run('bash', [script(file), ...args], { env: { ...env, ...extra }, cwd: root, timeout: 300_000 });

  afterAll(async () => {
    await bash('infra.sh', ['down']).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  it('pg-ha.sh kill with no cluster in the directory fails and says where it looked', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'idmint-infra-empty-'));
    try {
      const err = await run('bash', [script('pg-ha.sh'), 'kill', '1'], {
        env: { ...process.env, IDMINT_INFRA_DIR: empty, IDMINT_PG_HA_DIR: '' },
        cwd: root,
      }).then(
        () => undefined,
        (e: { code: number; stderr: string }) => e,
      );
      expect(err?.code).toBe(1);
      expect(err?.stderr).toContain(`no cluster in ${join(empty, 'pg-ha')}`);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it('kills a member of the cluster infra.sh started there, and down from a sourced shell stops every server', async () => {
    const [zk, pg] = await Promise.all([freePort(), freePort()]);
    env = {
      ...process.env,
      IDMINT_INFRA_DIR: dir,
      // Unset: a new IDMINT_INFRA_DIR uses the checkout's jar cache, never a download of its own.
      IDMINT_INFRA_LIB: undefined,
      IDMINT_INFRA_ZK_PORT: String(zk),
      IDMINT_INFRA_PG_PORT: String(pg),
      IDMINT_INFRA_PG_HA: '1',
      IDMINT_PG_HA_PORT: String(21000 + Math.floor(Math.random() * 4000)),
      IDMINT_PG_HA_SCOPE: `smoke${Math.random().toString(36).slice(2, 8)}`,
      IDMINT_PG_HA_DIR: '',
      // Kafka and Redis: the shared servers, named by the environment, so up starts neither.
      KAFKA_BROKERS: process.env.KAFKA_BROKERS,
      REDIS_URL: process.env.REDIS_URL,
      ZK_CONNECT: '',
      DATABASE_URL: '',
    };
    const up = await bash('infra.sh', ['up']);
    expect(up.stderr).not.toMatch(/downloading/);
    expect(existsSync(join(dir, 'lib'))).toBe(false);
    const vars = sourced(join(dir, 'env'));
    expect(vars.DATABASE_URL).toContain('target_session_attrs=read-write');
    expect(processesMentioning(join(dir, 'postgres', 'data')).length).toBeGreaterThan(0);
    expect(processesMentioning(join(dir, 'pg-ha', 'data1')).length).toBeGreaterThan(0);

    // As an operator runs it: only IDMINT_INFRA_DIR says where the cluster is.
    const killed = await bash('pg-ha.sh', ['kill', '1'], vars);
    expect(killed.stderr).toContain('n1 killed');
    expect(processesMentioning(join(dir, 'pg-ha', 'data1'))).toEqual([]);
    const again = await bash('pg-ha.sh', ['kill', '1'], vars).then(
      () => '',
      (e: { stderr: string }) => e.stderr,
    );
    expect(again).toContain('member n1 runs neither Patroni nor Postgres');

    // down from the shell that sourced the env: DATABASE_URL names Patroni's nodes there.
    await bash('infra.sh', ['down'], vars);
    expect(processesMentioning(dir)).toEqual([]);
  });
});
