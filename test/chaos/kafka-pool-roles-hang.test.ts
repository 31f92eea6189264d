import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdmintClient } from '../../src/client/client.js';
import { kafkaPoolTransport } from '../../src/client/kafka/transports.js';
import { isIdmintError } from '../../src/core/errors.js';
import { KafkaPoolSink } from '../../src/pool/kafka/sink.js';
import { env } from '../support/env.js';
import { startKafkaCluster, type KafkaCluster } from '../support/kafka-cluster.js';
import { testKafka } from '../support/kafka.js';
import { uniqueName } from '../support/names.js';
import { sleep, until } from '../support/poll.js';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';
import { freshStore, type TestStore } from '../support/store.js';
import { expectNoDuplicates } from '../support/unique.js';
import { TEST_VERIFY_KEY, testSigner } from '../support/signing.js';

/**
 * The Kafka pool path as deployed: two `idmint serve` refill processes (BullMQ jobs, the pool
 * watch) fill a pool topic on three brokers, an SDK instance takes from it under load, and each
 * broker in turn is SIGSTOPped for 10 s. After every hang the SDK must be served from the topic
 * again (the 30-minute replicated chaos run once saw the pool path stop for good after a hang),
 * and no ID may repeat.
 */
describe('Kafka pool topics refilled by refill processes, each broker hung in turn', () => {
  let cluster: KafkaCluster;
  let st: TestStore;
  const roles: SpawnedServer[] = [];
  const dirs: string[] = [];

  beforeAll(async () => {
    cluster = await startKafkaCluster(3);
    st = await freshStore('kproles');
  }, 300_000);

  afterAll(async () => {
    await Promise.all(roles.map((r) => r.stop('SIGKILL').catch(() => undefined)));
    await st?.close();
    await cluster?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }, 120_000);

  it('serves from the topic again after each hang: 0 duplicates', async () => {
    const bizTag = uniqueName('kproles');
    await st.store.createBiz({ bizTag, step: 1000, pool: 'kafka' });
    const queue = uniqueName('kproles-refill');
    for (let i = 0; i < 2; i++) {
      const dataDir = mkdtempSync(join(tmpdir(), 'idmint-kproles-'));
      dirs.push(dataDir);
      roles.push(
        await spawnServer({
          DATABASE_URL: st.url,
          REDIS_URL: env('REDIS_URL'),
          KAFKA_BROKERS: cluster.brokers,
          IDMINT_ROLES: 'refill',
          IDMINT_REFILL_QUEUE: queue,
          IDMINT_REFILL_EVERY_MS: '2000',
          IDMINT_POOL_SECONDS: '5',
          IDMINT_KAFKA_PARTITIONS: '4',
          IDMINT_DATA_DIR: dataDir,
          LOG_LEVEL: 'info',
        }),
      );
    }
    const kafka = testKafka('kproles-sdk', cluster.brokers);
    const client = new IdmintClient({
      transport: kafkaPoolTransport({ verifyKey: TEST_VERIFY_KEY, kafka, takeTimeoutMs: 2000 }),
      timeoutMs: 5000,
      batchSize: 100,
    });
    const sink = new KafkaPoolSink({ signer: testSigner, kafka: testKafka('kproles-look', cluster.brokers) });
    const ids: number[] = [];
    const errors = new Map<string, number>();
    let running = true;
    const load = (async () => {
      while (running) {
        try {
          for (const id of await client.nextMany(bizTag, 500)) ids.push(Number(id));
        } catch (err) {
          if (!isIdmintError(err)) throw err;
          errors.set(err.code, (errors.get(err.code) ?? 0) + 1);
          await sleep(100);
        }
      }
    })();
    const detail = async (): Promise<string> => {
      const state = await sink.state(bizTag, 0).catch((err: unknown) => (err as Error).message);
      const topic = typeof state === 'string' || state === null ? String(state) : `unconsumed ${state.unconsumed.join('/')}, committed ${state.committed}`;
      return `${ids.length} IDs, errors ${JSON.stringify(Object.fromEntries(errors))}; topic: ${topic}\n${roles.map((r, i) => `--- refill-${i + 1}\n${r.output().slice(-4000)}`).join('\n')}`;
    };
    const report: string[] = [];
    try {
      await until('the SDK served from the pool topic', () => ids.length > 50_000, { timeoutMs: 120_000 });
      for (const node of cluster.nodeIds) {
        cluster.pause(node);
        await sleep(10_000);
        cluster.resume(node);
        const at = Date.now();
        const mark = ids.length;
        try {
          await until(`IDs from the topic again after broker ${node} hung`, () => ids.length > mark + 50_000, { timeoutMs: 90_000 });
        } catch (err) {
          throw new Error(`${(err as Error).message}\n${await detail()}`);
        }
        report.push(`broker ${node}: served again ${Date.now() - at} ms after it resumed`);
        await cluster.untilInSync();
      }
    } finally {
      running = false;
      await load;
      await client.close();
      await sink.close();
    }
    console.info(`kafka pool with refill processes: ${ids.length} IDs; ${report.join('; ')}; errors ${JSON.stringify(Object.fromEntries(errors))}`);
    expectNoDuplicates(Float64Array.from(ids), 'Kafka pool IDs through broker hangs');
    expect(ids.length).toBeGreaterThan(200_000);
  }, 900_000);
});
