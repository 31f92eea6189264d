import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

// `idmint/client` loads no Kafka client until a Kafka transport starts: an HTTP-only
// application does not pay for KafkaJS (about half of the SDK's import time, CHANGELOG).
const RECORDER = pathToFileURL(fileURLToPath(new URL('../../support/imports/record.mjs', import.meta.url))).href;
const FIXTURE = fileURLToPath(new URL('./fixtures/lazy-kafka.ts', import.meta.url));

function packagesLoaded(step: 'http' | 'built' | 'started' | 'started-platformatic'): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-lazy-kafka-'));
  const file = join(dir, 'imports.txt');
  writeFileSync(file, '');
  try {
    execFileSync(process.execPath, ['--import', 'tsx', '--import', RECORDER, FIXTURE, step], {
      env: { ...process.env, IDMINT_TEST_IMPORTS_FILE: file },
      stdio: 'pipe',
    });
    return [...new Set(readFileSync(file, 'utf8').split('\n').filter(Boolean))];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('idmint/client loads a Kafka client only when a Kafka transport starts', () => {
  it('an HTTP-only application, and one that builds a Kafka transport without using it, load no Kafka client', () => {
    for (const step of ['http', 'built'] as const) {
      const loaded = packagesLoaded(step);
      expect(loaded).not.toContain('kafkajs');
      expect(loaded).not.toContain('@platformatic/kafka');
    }
  }, 60_000);

  it('the chosen driver, and only it, is loaded when a Kafka transport starts', () => {
    const kafkajs = packagesLoaded('started');
    expect(kafkajs).toContain('kafkajs');
    expect(kafkajs).not.toContain('@platformatic/kafka');
    const platformatic = packagesLoaded('started-platformatic');
    expect(platformatic).toContain('@platformatic/kafka');
    expect(platformatic).not.toContain('kafkajs');
  }, 60_000);
});
