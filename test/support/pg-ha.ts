import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { untilValue } from './poll.js';

const run = promisify(execFile);
const SCRIPT = fileURLToPath(new URL('../../scripts/pg-ha.sh', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export type Member = 'n1' | 'n2' | 'n3';

/**
 * Three Postgres 15 nodes under Patroni on a ZooKeeper (scripts/pg-ha.sh), in a directory and on
 * ports of their own, for the failover tests and the chaos harness's `--topology ha`.
 */
export class PgHa {
  private constructor(
    readonly dir: string,
    /** The first Postgres port: member nN listens on port + N − 1. */
    readonly port: number,
    private readonly env: NodeJS.ProcessEnv,
    /** The multi-host URL (target_session_attrs=read-write) over the three members. */
    readonly url: string,
  ) {}

  static async start(zkConnect: string, options: { scope: string; sync?: boolean; ttlSeconds?: number }): Promise<PgHa> {
    const dir = mkdtempSync(join(tmpdir(), 'idmint-pg-ha-'));
    chmodSync(dir, 0o755); // Patroni runs as the postgres user when we are root: it must reach its configs
    // Three Postgres ports from here, their REST ports at +100.
    const port = 21000 + Math.floor(Math.random() * 4000);
    const env = {
      ...process.env,
      IDMINT_PG_HA_DIR: join(dir, 'cluster'),
      IDMINT_PG_HA_PORT: String(port),
      IDMINT_PG_HA_SCOPE: options.scope,
      IDMINT_PG_HA_SYNC: options.sync ? '1' : '0',
      IDMINT_PG_HA_TTL: String(options.ttlSeconds ?? 20),
      ZK_CONNECT: zkConnect,
    };
    const ha = new PgHa(dir, port, env, '');
    try {
      const url = /^DATABASE_URL=(.+)$/m.exec(await ha.run('up'))?.[1];
      if (!url) throw new Error('pg-ha.sh up printed no DATABASE_URL');
      return new PgHa(dir, port, env, url);
    } catch (err) {
      await ha.close();
      throw err;
    }
  }

  /** Runs scripts/pg-ha.sh with this cluster's settings; its stdout. */
  async run(...args: string[]): Promise<string> {
    return (await run('bash', [SCRIPT, ...args], { env: this.env, cwd: ROOT, timeout: 240_000 })).stdout.trim();
  }

  /** The leader's member name, or '' while there is none. */
  async leader(): Promise<Member | ''> {
    return (await this.run('leader').catch(() => '')) as Member | '';
  }

  /** Postgres port of a member. */
  portOf(member: Member): number {
    return this.port + Number(member.slice(1)) - 1;
  }

  kill(member: Member): Promise<string> {
    return this.run('kill', member);
  }

  start(member: Member): Promise<string> {
    return this.run('start', member);
  }

  /** SIGSTOP the member's WAL senders: its commits from now on reach no replica. */
  freeze(member: Member): Promise<string> {
    return this.run('freeze', member);
  }

  /** A planned switchover away from `leader` (patronictl): a clean stop, then a replica promoted. */
  switchover(leader: Member): Promise<string> {
    return this.run('switchover', leader);
  }

  /** Until a leader other than `old` is elected; the new leader. */
  async promotedAfter(old: Member, timeoutMs = 90_000): Promise<Member> {
    return (await untilValue(
      'Patroni to promote a replica',
      () => this.leader(),
      (l) => l !== '' && l !== old,
      { timeoutMs, intervalMs: 500 },
    )) as Member;
  }

  /** Until every replica that answers has replayed what the leader had written when this was called. */
  async caughtUp(timeoutMs = 60_000): Promise<void> {
    const leader = await this.leader();
    if (leader === '') throw new Error('no leader');
    const query = async (member: Member, sql: string): Promise<string | undefined> => {
      const client = new pg.Client({
        connectionString: `postgres://postgres:postgres@127.0.0.1:${this.portOf(member)}/postgres`,
        connectionTimeoutMillis: 2000,
      });
      try {
        await client.connect();
        return (await client.query<{ lsn: string }>(sql)).rows[0]?.lsn;
      } catch {
        return undefined; // a member that does not answer is not a candidate
      } finally {
        await client.end().catch(() => undefined);
      }
    };
    const target = await query(leader, 'SELECT pg_current_wal_lsn()::text AS lsn');
    if (!target) throw new Error(`the leader ${leader} does not answer`);
    for (const member of (['n1', 'n2', 'n3'] as const).filter((m) => m !== leader)) {
      await untilValue(
        `${member} to replay up to the leader's ${target}`,
        () => query(member, `SELECT (pg_last_wal_replay_lsn() >= '${target}'::pg_lsn)::text AS lsn`),
        (ok) => ok === undefined || ok === 'true',
        { timeoutMs, intervalMs: 200 },
      );
    }
  }

  /** Until there is a leader and every member runs or streams. */
  async whole(seconds = 180): Promise<void> {
    await this.run('wait', String(seconds));
  }

  async close(): Promise<void> {
    await this.run('down').catch((err: unknown) => console.warn('pg-ha down failed:', err));
    rmSync(this.dir, { recursive: true, force: true });
  }
}
