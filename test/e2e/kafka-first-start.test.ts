import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafkaClient } from '../../src/client/kafka/rpc-client.js';
import { testKafka } from '../support/kafka.js';
import { startPrivateServer, type PrivateServer } from '../support/servers.js';
import { spawnServer, untilReady } from '../support/spawn.js';
import { freshStore, type TestStore } from '../support/store.js';
import { TEST_VERIFY_KEY } from '../support/signing.js';

// A normal first start on a fresh broker (no topics, no groups, the group coordinator still
// loading) is no error: KafkaJS's retried start-up conditions are logged at debug, not as ERROR or
// WARN lines an on-call engineer would chase.
describe('the first start on a fresh Kafka broker', () => {
  let kafka: PrivateServer;
  let st: TestStore;
  let dataDir: string;
  beforeAll(async () => {
    kafka = await startPrivateServer('kafka');
    st = await freshStore('kfirst');
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-kfirst-'));
  }, 120_000);
  afterAll(async () => {
    await st?.close();
    await kafka?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('serves a Kafka request and logs no ERROR or WARN line from its Kafka driver', async () => {
    const server = await spawnServer({
      DATABASE_URL: st.url,
      KAFKA_BROKERS: kafka.url,
      IDMINT_DATA_DIR: dataDir,
      IDMINT_ROLES: 'api,responder',
      LOG_LEVEL: 'info',
    });
    const client = createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka: testKafka('kfirst-test', kafka.url), clientId: 'kfirst-test' });
    try {
      await untilReady(server.url, { status: 'ready', timeoutMs: 90_000, output: server.output });
      expect(
        (await fetch(`${server.url}/v1/biz`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"bizTag":"first"}' })).status,
      ).toBe(201);
      await client.start();
      expect(await client.getIds('first', 3, { timeoutMs: 30_000 })).toHaveLength(3);
    } finally {
      await client.close();
      await server.stop('SIGTERM');
    }
    const loud = server
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { level: number; component?: string; msg: string; error?: string })
      .filter((l) => l.level >= 40 && (l.component === 'kafkajs' || l.component === 'platformatic-kafka'));
    expect(loud.map((l) => `${l.msg}${l.error ? `: ${l.error}` : ''}`)).toEqual([]);
  }, 180_000);
});
