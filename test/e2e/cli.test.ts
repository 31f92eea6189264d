import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, spawnServer, type SpawnedServer } from '../support/spawn.js';
import { expectNoDuplicates } from '../support/unique.js';
import { idmint } from '../support/cli.js';

const TOKEN = 'cli-admin-token';

describe('idmint CLI against a running server', () => {
  let dataDir: string;
  let server: SpawnedServer;
  let env: Record<string, string>;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-cli-'));
    server = await spawnServer({ IDMINT_DATA_DIR: dataDir, IDMINT_ADMIN_TOKEN: TOKEN });
    env = { IDMINT_URL: server.url, IDMINT_ADMIN_TOKEN: TOKEN };
  });

  afterAll(async () => {
    await server?.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('lists its subcommands in --help', async () => {
    const { code, stdout } = await idmint(['--help']);
    expect(code).toBe(0);
    for (const command of ['serve', 'biz', 'get', 'decode']) expect(stdout).toContain(command);
  });

  it('biz update offers what can change (--start-after), not what cannot (--mode, --format)', async () => {
    const update = await idmint(['biz', 'update', '--help']);
    expect(update.stdout).toContain('--start-after');
    expect(update.stdout).not.toMatch(/--mode|--format/);
    const create = await idmint(['biz', 'create', '--help']);
    expect(create.stdout).toMatch(/--mode[\s\S]*--format|--format[\s\S]*--mode/);
  });

  it('creates, lists, updates and deletes a tag, and fetches and decodes IDs', async () => {
    const created = await idmint(['biz', 'create', 'ticket', '--step', '50', '--fallback', 'error'], env);
    expect(created.code).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ bizTag: 'ticket', step: 50, fallback: 'error' });

    const list = await idmint(['biz', 'list'], env);
    expect(list.stdout).toMatch(/^ticket\s+segment\s+step=50/m);

    const updated = await idmint(['biz', 'update', 'ticket', '--max-limit', '1000'], env);
    expect(JSON.parse(updated.stdout)).toMatchObject({ maxLimit: 1000 });
    // `none` (as --help advertises) removes the limit.
    const unlimited = await idmint(['biz', 'update', 'ticket', '--max-limit', 'none'], env);
    expect(unlimited.stderr).toBe('');
    expect(JSON.parse(unlimited.stdout)).toMatchObject({ maxLimit: null });
    await idmint(['biz', 'update', 'ticket', '--max-limit', '1000'], env);

    const got = await idmint(['get', 'ticket', '-n', '5'], env);
    expect(got.code).toBe(0);
    const ids = got.stdout.trim().split('\n');
    expect(ids).toHaveLength(5);
    expectNoDuplicates(ids);
    expect(ids).toHaveLength(5);

    const decoded = await idmint(['decode', ids[0]!, '--biz-tag', 'ticket'], env);
    expect(JSON.parse(decoded.stdout)).toMatchObject({ type: 'segment', id: ids[0] });

    const deleted = await idmint(['biz', 'delete', 'ticket'], env);
    expect(deleted.stdout).toContain('deleted ticket');
  });

  it.each([
    ['an unknown tag', ['get', 'nope'], /UNKNOWN_BIZ_TAG: unknown biz tag "nope"/],
    ['a bad count', ['get', 'demo', '-n', 'ten'], /--count must be an integer/],
    ['a wrong token', ['biz', 'list', '--token', 'wrong-token'], /UNAUTHORIZED: wrong admin token \(set IDMINT_ADMIN_TOKEN or pass --token\)/],
    ['an update with nothing to change', ['biz', 'update', 'demo'], /nothing to change/],
    ['a bad ID to decode', ['decode', 'abc'], /BAD_REQUEST: id must be a decimal integer/],
  ])('fails with one clear line and exit code 1 for %s', async (_what, args, message) => {
    const run = await idmint(args, env);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(message);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('decode: long sqids input is one BAD_REQUEST line (was 503), and a tag with tokens decodes with --token (issue 42)', async () => {
    expect((await idmint(['biz', 'create', 'cli-sq', '--format', 'sqids'], env)).code).toBe(0);
    const long = await idmint(['decode', 'zzzzzzzzzzzzzzzzzzzzzz', '--biz-tag', 'cli-sq'], env);
    expect(long.code).toBe(1);
    expect(long.stderr).toMatch(/^idmint: BAD_REQUEST: .*format sqids/);
    const id = (await idmint(['get', 'cli-sq'], env)).stdout.trim();
    const tagToken = (JSON.parse((await idmint(['biz', 'token', 'create', 'cli-sq'], env)).stdout) as { token: string }).token;
    expect((await idmint(['decode', id, '--biz-tag', 'cli-sq'], env)).stderr).toMatch(/^idmint: UNAUTHORIZED: /);
    const decoded = await idmint(['decode', id, '--biz-tag', 'cli-sq', '--token', tagToken], env);
    expect(decoded.code, decoded.out).toBe(0);
    expect(JSON.parse(decoded.stdout)).toMatchObject({ id, raw: expect.stringMatching(/^\d+$/), format: 'sqids' });
  });

  it('says how to start a server when none answers', async () => {
    const port = await freePort();
    const run = await idmint(['get', 'demo'], { IDMINT_URL: `http://127.0.0.1:${port}` });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/NOT_READY: cannot reach idmint at .* start it with `npm start` or pass --url/);
  });

  it('refuses to expose the admin API off loopback without a token', async () => {
    const run = await idmint(['serve'], {
      IDMINT_HOST: '0.0.0.0',
      IDMINT_PORT: String(await freePort()),
      IDMINT_DATA_DIR: join(dataDir, 'open'),
      IDMINT_ADMIN_TOKEN: '',
      DATABASE_URL: '',
      REDIS_URL: '',
      KAFKA_BROKERS: '',
      ZK_CONNECT: '',
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/IDMINT_ADMIN_TOKEN is required when IDMINT_HOST \(0\.0\.0\.0\) is not a loopback address/);
  });

  it('names the variable when the configuration is bad', async () => {
    const run = await idmint(['serve'], { IDMINT_PORT: 'eighty', IDMINT_DATA_DIR: dataDir });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/IDMINT_PORT: expected/);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
  });
});
