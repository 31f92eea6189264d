import { randomBytes } from 'node:crypto';
import type { Kafka } from 'kafkajs';
import { Dispenser } from '../../../src/dispenser/dispenser.js';
import { silentLogger } from '../../../src/core/logger.js';
import { MemoryPool } from '../../../src/dispenser/sources/memory.js';
import { createKafka } from '../../../src/kafka/kafka.js';
import { ensureTopics } from '../../../src/kafka/topics.js';
import { DirectSegmentSource } from '../../../src/dispenser/sources/segment.js';
import { PostgresBizStore } from '../../../src/store/biz-store.js';
import type { Database } from '../../../src/store/db.js';
import { migrate } from '../../../src/store/migrations.js';
import { createPgDatabase } from '../../../src/store/pg.js';

/** Shared set-up for the Kafka tests: unique names, a real store in its own schema, a real dispenser. */

export function unique(prefix: string): string {
  return `${prefix}-${randomBytes(5).toString('hex')}`;
}

export function env(name: 'KAFKA_BROKERS' | 'DATABASE_URL' | 'REDIS_URL'): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: the vitest global setup (test/setup/global-infra.ts) should have set it`);
  return value;
}

export function testKafka(clientId = 'idmint-test'): Kafka {
  return createKafka({ brokers: env('KAFKA_BROKERS'), clientId, logger: silentLogger });
}

export async function createTopic(kafka: Kafka, topic: string, numPartitions = 1): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await ensureTopics(admin, [{ topic, numPartitions }]);
  } finally {
    await admin.disconnect();
  }
}

export async function deleteTopics(kafka: Kafka, topics: string[]): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.deleteTopics({ topics });
  } catch {
    // Best effort: the topic names are unique per test, so a leftover harms nothing.
  } finally {
    await admin.disconnect();
  }
}

export interface TestStore {
  schema: string;
  db: Database;
  store: PostgresBizStore;
  dispenser: Dispenser;
  close(): Promise<void>;
}

/** Postgres (DATABASE_URL) in a fresh schema, with the real dispenser over in-memory double buffers. */
export async function createTestStore(schema = `kafka_${randomBytes(5).toString('hex')}`): Promise<TestStore> {
  const db = createPgDatabase({ connectionString: env('DATABASE_URL'), schema });
  await migrate(db);
  const store = new PostgresBizStore(db);
  const memory = new MemoryPool({ allocator: store });
  const dispenser = new Dispenser({ store, pools: { memory }, segment: new DirectSegmentSource(store) });
  return {
    schema,
    db,
    store,
    dispenser,
    async close() {
      await memory.close();
      await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
      await db.close();
    },
  };
}

/** Asserts nothing repeats; returns the set. */
export function distinct(ids: readonly string[]): Set<string> {
  const seen = new Set<string>();
  const dupes: string[] = [];
  for (const id of ids) {
    if (seen.has(id)) dupes.push(id);
    seen.add(id);
  }
  if (dupes.length > 0) throw new Error(`${dupes.length} duplicate IDs, e.g. ${dupes.slice(0, 5).join(', ')}`);
  return seen;
}
