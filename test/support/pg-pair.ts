import { execFile } from 'node:child_process';
import { chownSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from './ports.js';
import { until } from './poll.js';

const run = promisify(execFile);

/** Postgres's own binaries (the directory pg_ctl lives in), PATH first, then Debian's layout. */
function binDir(): string {
  for (const candidate of ['/usr/local/bin/pg_ctl', '/usr/lib/postgresql/15/bin/pg_ctl', '/usr/lib/postgresql/16/bin/pg_ctl']) {
    try {
      return dirname(realpathSync(candidate));
    } catch {
      // next
    }
  }
  throw new Error('pg_ctl not found: apt-get install -y postgresql');
}

/** initdb, postgres and pg_basebackup refuse root: run them as the postgres user then. */
async function asPostgres(bin: string, args: string[]): Promise<string> {
  const root = process.getuid?.() === 0;
  const { stdout } = root ? await run('runuser', ['-u', 'postgres', '--', bin, ...args], { cwd: '/' }) : await run(bin, args, { cwd: '/' });
  return stdout;
}

/**
 * A Postgres primary and one asynchronous streaming standby on loopback, each on its own port and
 * data dir, for failover tests: stop WAL delivery, crash the primary, promote the standby.
 */
export class PgPair {
  private constructor(
    readonly dir: string,
    readonly primaryPort: number,
    readonly standbyPort: number,
    private readonly bin: string,
    private readonly synchronous: boolean,
  ) {}

  /** `synchronous`: the primary waits for the standby to confirm each commit (`synchronous_standby_names = '*'`). */
  static async start(options: { synchronous?: boolean } = {}): Promise<PgPair> {
    const bin = binDir();
    const dir = mkdtempSync(join(tmpdir(), 'idmint-pgpair-'));
    if (process.getuid?.() === 0)
      chownSync(dir, Number((await run('id', ['-u', 'postgres'])).stdout.trim()), Number((await run('id', ['-g', 'postgres'])).stdout.trim()));
    const pair = new PgPair(dir, await freePort(), await freePort(), bin, options.synchronous === true);
    await asPostgres(join(bin, 'initdb'), ['-D', pair.data('primary'), '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8', '--no-sync']);
    await pair.pgctl('primary', 'start');
    await asPostgres(join(bin, 'pg_basebackup'), [
      '-h',
      '127.0.0.1',
      '-p',
      String(pair.primaryPort),
      '-U',
      'postgres',
      '-D',
      pair.data('standby'),
      '-R',
      '-X',
      'stream',
      '--no-sync',
    ]);
    await pair.pgctl('standby', 'start');
    return pair;
  }

  /** Both hosts, the standby first: a client must find the primary by asking. */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.standbyPort},127.0.0.1:${this.primaryPort}/postgres`;
  }

  urlOf(node: 'primary' | 'standby'): string {
    return `postgres://postgres@127.0.0.1:${node === 'primary' ? this.primaryPort : this.standbyPort}/postgres`;
  }

  async sql<R = Record<string, unknown>>(node: 'primary' | 'standby', text: string): Promise<R[]> {
    const client = new pg.Client({ connectionString: this.urlOf(node) });
    await client.connect();
    try {
      return (await client.query(text)).rows as R[];
    } finally {
      await client.end();
    }
  }

  /** Waits until the standby has replayed everything the primary wrote. */
  async caughtUp(): Promise<void> {
    await until(
      'the standby replaying the primary',
      async () => {
        const rows = await this.sql<{ done: boolean }>('primary', 'SELECT replay_lsn >= pg_current_wal_lsn() AS done FROM pg_stat_replication');
        return rows[0]?.done === true;
      },
      { timeoutMs: 30_000 },
    );
  }

  /** A one-value query (`... AS v`) on the standby once it has replayed everything it received. */
  async replayedValue(text: string): Promise<string> {
    await until(
      'the standby replaying what it received',
      async () => {
        const rows = await this.sql<{ done: boolean }>('standby', 'SELECT pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn() AS done');
        return rows[0]?.done === true;
      },
      { timeoutMs: 30_000 },
    );
    return (await this.sql<{ v: string }>('standby', text))[0]!.v;
  }

  /** Freezes the primary's WAL senders (SIGSTOP): what it commits from now on never reaches the standby. */
  async stopWalDelivery(): Promise<void> {
    const rows = await this.sql<{ pid: number }>('primary', 'SELECT pid FROM pg_stat_replication');
    if (rows.length === 0) throw new Error('the primary has no WAL sender');
    for (const { pid } of rows) process.kill(pid, 'SIGSTOP');
  }

  /** SIGKILL of the primary's postmaster and every child (a frozen child would keep its listening socket open). */
  async crashPrimary(): Promise<void> {
    const postmaster = Number(readFileSync(join(this.data('primary'), 'postmaster.pid'), 'utf8').split('\n')[0]);
    const { stdout } = await run('ps', ['-o', 'pid=', '--ppid', String(postmaster)]).catch(() => ({ stdout: '' }));
    for (const pid of [postmaster, ...stdout.split(/\s+/).filter(Boolean).map(Number)]) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await until(
      'the crashed primary refusing connections',
      async () => {
        try {
          await this.sql('primary', 'SELECT 1');
          return false;
        } catch {
          return true;
        }
      },
      { timeoutMs: 10_000 },
    );
  }

  /**
   * A planned switchover: the primary shuts down cleanly (which first sends every WAL record to
   * the standby), then the standby is promoted. Nothing committed is lost.
   */
  async switchover(): Promise<void> {
    await asPostgres(join(this.bin, 'pg_ctl'), ['-D', this.data('primary'), '-m', 'fast', '-w', 'stop']);
    await this.promote();
  }

  /** Promotes the standby to a primary on a new timeline (what Patroni does after a crash). */
  async promote(): Promise<void> {
    await asPostgres(join(this.bin, 'pg_ctl'), ['-D', this.data('standby'), '-w', '-t', '60', 'promote']);
  }

  async stop(): Promise<void> {
    for (const node of ['standby', 'primary'] as const) {
      await asPostgres(join(this.bin, 'pg_ctl'), ['-D', this.data(node), '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  private data(node: 'primary' | 'standby'): string {
    return join(this.dir, node);
  }

  private async pgctl(node: 'primary' | 'standby', action: 'start'): Promise<void> {
    const port = node === 'primary' ? this.primaryPort : this.standbyPort;
    const sync = node === 'primary' && this.synchronous ? ` -c synchronous_standby_names='*'` : '';
    const opts = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${this.dir} -c fsync=off -c shared_buffers=16MB -c max_connections=40${sync}`;
    await asPostgres(join(this.bin, 'pg_ctl'), ['-D', this.data(node), '-l', join(this.dir, `${node}.log`), '-o', opts, '-w', '-t', '60', action]);
  }
}
