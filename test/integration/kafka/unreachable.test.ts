import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { testKafka } from '../../support/kafka.js';
import { createKafkaClient } from '../../../src/client/kafka/rpc-client.js';
import { createResponder } from '../../../src/kafka/responder.js';
import { KafkaPoolConsumer } from '../../../src/client/kafka/pool-consumer.js';
import type { IdDispenser } from '../../../src/core/ports.js';
import { TEST_VERIFY_KEY, testSigner } from '../../support/signing.js';

/** A port nothing listens on: bound, then released. */
async function deadPort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

// An unreachable broker fails start() fast (through options, not sleeps) as NOT_READY.
describe('Kafka unreachable', () => {
  it('client, responder and pool consumer fail to start with NOT_READY, and close cleanly', async () => {
    const kafka = testKafka('idmint-test', `127.0.0.1:${await deadPort()}`, { retries: 0, connectionTimeoutMs: 200 });
    const dispenser: IdDispenser = { get: () => Promise.reject(new Error('unused')) };
    const parts = [
      createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, joinTimeoutMs: 1000 }),
      createResponder({ signer: testSigner, kafka, dispenser, joinTimeoutMs: 1000 }),
      new KafkaPoolConsumer({ verifyKey: TEST_VERIFY_KEY, kafka, bizTag: 'order', joinTimeoutMs: 1000 }),
    ];
    for (const part of parts) {
      await expect(part.start()).rejects.toMatchObject({ code: 'NOT_READY', message: expect.stringMatching(/^Kafka .* is unavailable/) });
      await part.close();
    }
  });
});
