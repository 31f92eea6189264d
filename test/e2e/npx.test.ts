import { execFile } from 'node:child_process';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

// `npx idmint` in a checkout: npm links the checkout into its npx cache and runs its `prepare`
// there. That was a full compile (14.5 s on every new checkout or copy); `prepare` now compiles
// only a stale dist/, so the first npx costs what any npx costs.
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const run = promisify(execFile);
const stamp = (): number => statSync(join(ROOT, 'dist', '.build-stamp')).mtimeMs;

describe('npx idmint in the checkout', () => {
  it('prepare leaves a fresh dist/ alone: nothing is compiled when npx links the checkout', async () => {
    await run(process.execPath, ['scripts/build.mjs', '--if-stale'], { cwd: ROOT });
    const before = stamp();
    const { stderr } = await run('npm', ['run', 'prepare', '--silent'], { cwd: ROOT });
    expect(stderr).not.toMatch(/compiling/);
    expect(stamp()).toBe(before);
  });

  it("runs the checkout's own CLI", async () => {
    const { stdout } = await run('npx', ['idmint', '--help'], { cwd: ROOT, env: { ...process.env, npm_config_update_notifier: 'false' } });
    expect(stdout).toContain('Usage: idmint');
  });
});
