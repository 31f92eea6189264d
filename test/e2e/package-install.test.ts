import { execFile } from 'node:child_process';
import { lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnServer } from '../support/spawn.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const run = promisify(execFile);
const npm = (args: string[], cwd: string) =>
  run('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd,
    env: { ...process.env, npm_config_update_notifier: 'false' },
    maxBuffer: 32 * 1024 * 1024,
  });
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');

/** Bytes under a directory (files' sizes, symlinks not followed). */
function sizeOf(path: string): number {
  const stat = lstatSync(path);
  if (!stat.isDirectory()) return stat.size;
  return readdirSync(path).reduce((sum, name) => sum + sizeOf(join(path, name)), 0);
}

const mb = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(1)} MB`;

/** A new ESM project that imports the SDK the way the README shows, from JavaScript and TypeScript. */
function consumer(): string {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-consumer-'));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', type: 'module', private: true }));
  writeFileSync(
    join(dir, 'use.mjs'),
    "import { createIdmintClient, httpTransport } from 'idmint/client';\nimport { IdmintError } from 'idmint';\nconsole.log(typeof createIdmintClient, typeof httpTransport, typeof IdmintError);\n",
  );
  writeFileSync(
    join(dir, 'use.ts'),
    "import { createIdmintClient, type IdmintClient } from 'idmint/client';\nconst client: IdmintClient = createIdmintClient({ url: 'http://127.0.0.1:8080' });\nconst id: Promise<bigint> = client.next('order');\nvoid id;\nawait client.close();\n",
  );
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, skipLibCheck: true, types: [] },
      files: ['use.ts'],
    }),
  );
  return dir;
}

// Installing the package as a user would; dependency tarballs come from npm's cache, which the project's own install filled.
describe('the installable package', () => {
  let packDir: string;
  let tarball: string;
  let clientTarball: string;
  const dirs: string[] = [];

  beforeAll(async () => {
    packDir = mkdtempSync(join(tmpdir(), 'idmint-pack-'));
    // `npm pack` runs `prepare`, which builds dist/; the client package's `prepack` builds its own.
    await npm(['pack', '--pack-destination', packDir], ROOT);
    await npm(['pack', './packages/client', '--pack-destination', packDir], ROOT);
    tarball = join(
      packDir,
      readdirSync(packDir).find((f) => /^idmint-\d.*\.tgz$/.test(f))!,
    );
    clientTarball = join(
      packDir,
      readdirSync(packDir).find((f) => f.startsWith('idmint-client-'))!,
    );
  });

  afterAll(() => {
    for (const dir of [packDir, ...dirs]) rmSync(dir, { recursive: true, force: true });
  });

  it('ships the build, the CLI, the Lua scripts and the dashboard assets, and no tests, benchmarks or CI files', async () => {
    const { stdout } = await run('tar', ['-tzf', tarball]);
    const files = stdout.split('\n');
    expect(files).toContain('package/dist/src/client/index.js');
    expect(files).toContain('package/dist/src/client/index.d.ts');
    expect(files).toContain('package/bin/idmint.js');
    expect(files).toContain('package/LICENSE');
    expect(files.some((f) => f.endsWith('.lua'))).toBe(true);
    // The dashboard's page script and stylesheet, read beside the sources as the Lua scripts are.
    expect(files).toEqual(expect.arrayContaining(['package/src/dashboard/assets/app.js', 'package/src/dashboard/assets/app.css']));
    expect(files.filter((f) => /^package\/(test|bench|\.ci|scripts)\//.test(f))).toEqual([]);
  });

  it.each(['tarball', 'path'] as const)('installed from a %s, imports idmint/client from JavaScript and TypeScript', async (from) => {
    const dir = consumer();
    dirs.push(dir);
    await npm(['install', '--prefer-offline', from === 'tarball' ? tarball : ROOT], dir);
    const { stdout } = await run(process.execPath, ['use.mjs'], { cwd: dir });
    expect(stdout.trim()).toBe('function function function');
    await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: dir });
    const help = await run(process.execPath, [join(dir, 'node_modules/idmint/bin/idmint.js'), '--help'], { cwd: dir });
    expect(help.stdout).toContain('Usage: idmint');
  });

  it('the client alone, idmint-client, installs kafkajs, zod and @opentelemetry/api and none of the server, and takes IDs from a running server', async () => {
    const client = mkdtempSync(join(tmpdir(), 'idmint-client-only-'));
    const full = mkdtempSync(join(tmpdir(), 'idmint-full-'));
    dirs.push(client, full);
    for (const dir of [client, full])
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', type: 'module', private: true }));
    await npm(['install', '--prefer-offline', clientTarball], client);
    await npm(['install', '--prefer-offline', tarball], full);
    // @opentelemetry/api: the SDK's spans (a no-op unless the application registers a tracer).
    expect(
      readdirSync(join(client, 'node_modules'))
        .filter((n) => !n.startsWith('.'))
        .sort(),
    ).toEqual(['@opentelemetry', 'idmint-client', 'kafkajs', 'zod']);
    const [clientBytes, fullBytes] = [sizeOf(join(client, 'node_modules')), sizeOf(join(full, 'node_modules'))];
    console.log(`installed size: idmint-client ${mb(clientBytes)}, idmint ${mb(fullBytes)}`);
    expect(clientBytes).toBeLessThan(fullBytes / 4);
    // The README states both figures: they stay what an install measures (a dependency's new
    // release moves them; then the README changes with the lockfile).
    const stated = /— ([\d.]+) MB installed against (\d+) MB for `idmint`/.exec(readFileSync(join(ROOT, 'README.md'), 'utf8'));
    expect(stated, 'the README states the client-only install size').not.toBeNull();
    expect(Math.abs(Number(stated![1]) - clientBytes / 2 ** 20), `README ${stated![1]} MB, measured ${mb(clientBytes)}`).toBeLessThanOrEqual(0.3);
    expect(
      Math.abs(Number(stated![2]) - fullBytes / 2 ** 20) / (fullBytes / 2 ** 20),
      `README ${stated![2]} MB, measured ${mb(fullBytes)}`,
    ).toBeLessThanOrEqual(0.1);

    const dataDir = mkdtempSync(join(tmpdir(), 'idmint-client-only-data-'));
    dirs.push(dataDir);
    const server = await spawnServer({ IDMINT_DATA_DIR: dataDir });
    try {
      // TypeScript against the package's own types, then run: one ID from the server.
      writeFileSync(
        join(client, 'use.ts'),
        `import { createIdmintClient, IdmintError, type IdmintClient } from 'idmint-client';\nconst c: IdmintClient = createIdmintClient({ url: '${server.url}' });\nconst id: bigint = await c.next('demo');\nconsole.log(String(id), typeof IdmintError);\nawait c.close();\n`,
      );
      writeFileSync(
        join(client, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, outDir: 'out', skipLibCheck: true, types: [] },
          files: ['use.ts'],
        }),
      );
      await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: client });
      const { stdout } = await run(process.execPath, ['out/use.js'], { cwd: client });
      expect(stdout.trim()).toMatch(/^\d+ function$/);
    } finally {
      await server.stop('SIGTERM');
    }
  });
});
