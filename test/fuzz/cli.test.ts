import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProgram, main } from '../../src/cli/main.js';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';
import { fuzzParameters, STACK_TRACE } from './runs.js';

const TOKEN = 'fuzz-cli-token';

// The client commands, run in process against a real server. `serve`, `kafka` and `import` are
// left out: they start servers or wait on networks, and have their own tests.
const command = fc.constantFrom(['biz', 'create'], ['biz', 'list'], ['biz', 'update'], ['biz', 'delete'], ['get'], ['decode'], [], ['biz'], ['nope']);
const word = fc.oneof(
  fc.constantFrom(
    'order',
    'demo',
    '--step',
    '--max-limit',
    'none',
    '--mode',
    'sharded',
    '--shards',
    '--fallback',
    '--pool',
    'redis-list',
    '-n',
    '--count',
    '--json',
    '--biz-tag',
    '--help',
    '-V',
    '--description',
    '--',
    '-',
    '--gate-pass',
  ),
  fc.constantFrom('0', '-1', '1e3', '0x10', '9007199254740992', '99999999999999999999', '1.5', ''),
  fc.string({ maxLength: 20 }),
);

describe('the CLI under fuzzing (random arguments, in process, a real server)', () => {
  let server: SpawnedServer;
  let dataDir: string;
  const saved = { url: process.env.IDMINT_URL, token: process.env.IDMINT_ADMIN_TOKEN };

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-fuzz-cli-'));
    server = await spawnServer({ IDMINT_DATA_DIR: dataDir, IDMINT_ADMIN_TOKEN: TOKEN });
    process.env.IDMINT_URL = server.url;
    process.env.IDMINT_ADMIN_TOKEN = TOKEN;
  });

  afterAll(async () => {
    process.env.IDMINT_URL = saved.url;
    process.env.IDMINT_ADMIN_TOKEN = saved.token;
    await server?.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('exits 0 or 1 with one-line messages and no stack trace, whatever the arguments', async () => {
    const write = { out: process.stdout.write.bind(process.stdout), err: process.stderr.write.bind(process.stderr) };
    await fc.assert(
      fc.asyncProperty(command, fc.array(word, { maxLength: 5 }), async (cmd, rest) => {
        const args = [...cmd, ...rest];
        let output = '';
        const capture = (chunk: string | Uint8Array): boolean => ((output += String(chunk)), true);
        process.stdout.write = capture as typeof process.stdout.write;
        process.stderr.write = capture as typeof process.stderr.write;
        process.exitCode = undefined;
        try {
          await main(['node', 'idmint', ...args], buildProgram({ exitOverride: true, write: (text) => void (output += text) }));
        } finally {
          process.stdout.write = write.out;
          process.stderr.write = write.err;
        }
        const code = (process.exitCode as number | string | undefined) ?? 0;
        process.exitCode = undefined;
        const where = `idmint ${JSON.stringify(args)} -> ${code}: ${output.slice(0, 400)}`;
        expect([0, 1], where).toContain(code);
        expect(output, where).not.toMatch(STACK_TRACE);
        // A refusal is one line naming what to fix, or the usage of the command that was incomplete.
        if (code === 1) expect(output, where).toMatch(/^(idmint: [A-Z_]+: |error: |Usage: )/m);
      }),
      fuzzParameters,
    );
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });
});
