import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Kafka } from 'kafkajs';
import { createKafkaClient } from '../../src/client/kafka/rpc-client.js';
import type { IdmintKafkaClient } from '../../src/client/kafka/rpc-client.js';
import { isIdmintError } from '../../src/core/errors.js';
import { createTopic, deleteTopics, testKafka } from '../support/kafka.js';
import { storeWithDispenser, type DispensingStore } from '../support/store.js';
import { uniqueName } from '../support/names.js';
import { env } from '../support/env.js';
import { expectNoDuplicates } from '../support/unique.js';
import { freePort } from '../support/spawn.js';
import { until } from '../support/poll.js';
import { TEST_SIGNING_SECRET, TEST_VERIFY_KEY } from '../support/signing.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

// The real responder process, SIGKILLed mid-stream and restarted over the same Postgres schema.
describe('responder process killed with SIGKILL mid-stream', () => {
  let kafka: Kafka;
  let ts: DispensingStore;
  const requestTopic = uniqueName('idmint.requests.crash');
  const groupId = uniqueName('idmint.responders.crash');
  const children: ChildProcess[] = [];

  // The same data dir and port across the crash and restart, as a supervisor would restart it.
  const dataDir = mkdtempSync(join(tmpdir(), 'idmint-responder-'));
  let port = 0;

  async function startResponder(extra: Record<string, string> = {}): Promise<ChildProcess> {
    port ||= await freePort();
    const child = spawn(process.execPath, ['--import', 'tsx', 'workers/responder.ts'], {
      cwd: root,
      env: {
        ...process.env,
        IDMINT_DATA_DIR: dataDir,
        IDMINT_PORT: String(port),
        KAFKA_BROKERS: env('KAFKA_BROKERS'),
        DATABASE_URL: env('DATABASE_URL'),
        IDMINT_PG_SCHEMA: ts.schema,
        IDMINT_KAFKA_REQUEST_TOPIC: requestTopic,
        IDMINT_KAFKA_RESPONDER_GROUP: groupId,
        IDMINT_KAFKA_SESSION_TIMEOUT_MS: '6000',
        IDMINT_SIGNING_KEY: TEST_SIGNING_SECRET,
        LOG_LEVEL: 'info',
        ...extra,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let output = '';
    return new Promise((resolve, reject) => {
      child.stdout!.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('"msg":"responder ready"')) resolve(child);
      });
      child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.on('exit', (code) => reject(new Error(`responder exited with ${code} before it was ready:\n${output}`)));
    });
  }

  beforeAll(async () => {
    kafka = testKafka();
    ts = await storeWithDispenser();
    await ts.store.createBiz({ bizTag: 'order', step: 500 });
    await createTopic(kafka, requestTopic, 4);
  });

  afterAll(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await deleteTopics(kafka, [requestTopic]);
    await ts?.close();
  });

  it('clients that time out retry; zero duplicates overall', async () => {
    const first = await startResponder();
    const clients: IdmintKafkaClient[] = Array.from({ length: 5 }, (_, i) =>
      createKafkaClient({ verifyKey: TEST_VERIFY_KEY, kafka, requestTopic, clientId: `crash-${i}` }),
    );
    await Promise.all(clients.map((c) => c.start()));
    const all: string[] = [];
    let timeouts = 0;
    let answered = 0;

    // Each client keeps 4 requests in flight; a timed-out request is retried under a new id.
    const load = Promise.all(
      clients.flatMap((c) =>
        Array.from({ length: 4 }, async () => {
          for (let r = 0; r < 40; r++) {
            for (;;) {
              try {
                all.push(...(await c.getIds('order', 7, { timeoutMs: 1500 })));
                answered++;
                break;
              } catch (err) {
                if (!isIdmintError(err) || err.code !== 'TIMEOUT') throw err;
                timeouts++;
              }
            }
          }
        }),
      ),
    );

    await until('150 answers before the crash', () => answered >= 150, { intervalMs: 20 });
    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    const second = await startResponder();
    await load;

    // Late or redelivered replies found no caller and were dropped; reported for the curious.
    process.stdout.write(
      `responder crash: ${timeouts} timeouts retried, ${clients.reduce((n, c) => n + c.droppedReplies, 0)} late/duplicate replies dropped\n`,
    );
    await Promise.all(clients.map((c) => c.close()));
    expect(answered).toBe(5 * 4 * 40);
    expect(timeouts).toBeGreaterThan(0);
    expect(all).toHaveLength(5 * 4 * 40 * 7);
    expectNoDuplicates(all);

    // A responder alone still holds its port, for health, readiness and metrics.
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).toMatch(/idmint_kafka_requests_total\{outcome="ok"\} [1-9]/);
    expect(metrics).toMatch(/idmint_kafka_reply_seconds_count\{outcome="ok"\} [1-9]/);

    // A clean stop: SIGTERM closes the consumer and exits 0.
    const exited = new Promise<number | null>((r) => second.once('exit', (code) => r(code)));
    second.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});
