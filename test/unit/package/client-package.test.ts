import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const read = (path: string) =>
  JSON.parse(readFileSync(new URL(`../../../${path}`, import.meta.url), 'utf8')) as {
    version: string;
    engines: { node: string };
    dependencies: Record<string, string>;
    peerDependencies?: Record<string, string>;
    peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  };

// packages/client is idmint's SDK built alone (idmint-client): it must never drift from idmint.
describe('the idmint-client package', () => {
  const root = read('package.json');
  const client = read('packages/client/package.json');

  it('has idmint’s version and engines', () => {
    expect(client.version).toBe(root.version);
    expect(client.engines).toEqual(root.engines);
  });

  it('depends on exactly the versions idmint pins, and on nothing of the server', () => {
    for (const [name, version] of Object.entries(client.dependencies)) expect(root.dependencies[name], name).toBe(version);
    expect(Object.keys(client.dependencies).sort()).toEqual(['@opentelemetry/api', 'kafkajs', 'zod']);
    // The second Kafka driver is the application's to install (docs/client.md): an optional peer at idmint's version.
    expect(client.peerDependencies).toEqual({ '@platformatic/kafka': root.dependencies['@platformatic/kafka'] });
    expect(client.peerDependenciesMeta).toEqual({ '@platformatic/kafka': { optional: true } });
  });
});
