import { existsSync, readFileSync } from 'node:fs';

/** The package's version, read from its package.json (beside src/ in a checkout, beside dist/ when built). */
export function packageVersion(): string {
  for (const up of ['../../package.json', '../../../package.json']) {
    const url = new URL(up, import.meta.url);
    if (!existsSync(url)) continue;
    const pkg = JSON.parse(readFileSync(url, 'utf8')) as { name?: string; version?: string };
    if (pkg.name === 'idmint' && pkg.version) return pkg.version;
  }
  return 'unknown';
}
