import { readFileSync } from 'node:fs';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

const root = new URL('../../../', import.meta.url);
const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(new URL('package-lock.json', root), 'utf8')) as {
  packages: Record<string, { engines?: { node?: string } | string[]; dev?: boolean }>;
};

describe('engines', () => {
  it('the oldest Node the package.json accepts satisfies every installed package (no EBADENGINE on install)', () => {
    const oldest = semver.minVersion(pkg.engines.node)!.version;
    const refused = Object.entries(lock.packages)
      .filter(([name, entry]) => name !== '' && !Array.isArray(entry.engines) && entry.engines?.node !== undefined)
      .filter(([, entry]) => !semver.satisfies(oldest, (entry.engines as { node: string }).node))
      .map(([name, entry]) => `${name} wants node ${(entry.engines as { node: string }).node}`);
    expect(refused).toEqual([]);
  });

  it('the Node running the tests is one the package.json accepts', () => {
    expect(semver.satisfies(process.version, pkg.engines.node)).toBe(true);
  });
});
