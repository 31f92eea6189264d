import { existsSync, readFileSync } from 'node:fs';

/**
 * Reads a Lua script shipped beside a module: `<module dir>/lua/<name>`. The build copies the
 * scripts next to the compiled files; if they are missing there (a plain `tsc`), the source tree's
 * copy is read instead, `srcDir` naming the module's folder under src/ (e.g. `pool/redis`).
 */
export function readLua(moduleUrl: string, srcDir: string, name: string): string {
  const beside = new URL(`./lua/${name}`, moduleUrl);
  if (existsSync(beside)) return readFileSync(beside, 'utf8');
  // Compiled code lives in dist/src/<srcDir>; its sources in src/<srcDir>.
  const depth = srcDir.split('/').length + 2;
  return readFileSync(new URL(`${'../'.repeat(depth)}src/${srcDir}/lua/${name}`, moduleUrl), 'utf8');
}
