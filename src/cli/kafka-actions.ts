import { loadConfig, type Config } from '../app/config.js';
import { kafkaFor } from '../app/kafka-client.js';
import { createLogger } from '../app/log.js';
import { BadRequestError, IdmintError } from '../core/errors.js';
import { createKafkaClient } from '../client/kafka/rpc-client.js';
import { initTopics, underReplicated } from '../kafka/topics.js';
import { kafkaNames } from '../kafka/names.js';
import { openKafka } from '../kafka/driver.js';
import type { KafkaConnectionOptions, KafkaDriver } from '../kafka/ports.js';

/** The Kafka commands' work, loaded only when one runs: the rest of the CLI never loads KafkaJS. */

const print = (line: string): void => void process.stdout.write(`${line}\n`);

/** The CLI's Kafka: quiet (a person reads one line, not KafkaJS's retries) and quick to give up. */
function cliKafka(): KafkaConnectionOptions {
  return kafkaFor(configWithBrokers(), 'idmint-cli', createLogger({ level: 'silent' }), { retries: 2, connectionTimeoutMs: 2000 });
}

/** A broker that cannot be reached is one line that says what to check. */
async function reachable<T>(driver: KafkaDriver | undefined, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof IdmintError) throw err;
    const cause = err as { message?: string };
    if (driver?.isClientError(err)) {
      throw new IdmintError(
        'NOT_READY',
        `cannot reach Kafka at ${process.env.KAFKA_BROKERS}: ${cause.message ?? String(err)}; check KAFKA_BROKERS (\`npm run infra:up\` starts a local one)`,
        { cause: err },
      );
    }
    throw err;
  }
}

/** The config, refusing with what to do when KAFKA_BROKERS is not set. */
function configWithBrokers(): Config {
  const config = loadConfig();
  if (!config.KAFKA_BROKERS)
    throw new IdmintError('BAD_REQUEST', 'KAFKA_BROKERS is not set (host:port[,host:port]); `npm run infra:up` writes it to .infra/env');
  return config;
}

export async function kafkaInit(o: { partitions?: number; poolTags?: string[]; poolPartitions?: number }): Promise<void> {
  const config = loadConfig();
  const driver = await openKafka(cliKafka());
  const admin = driver.admin();
  await reachable(driver, () => admin.connect());
  try {
    const created = await reachable(driver, () =>
      initTopics(admin, {
        requestPartitions: o.partitions ?? config.IDMINT_KAFKA_PARTITIONS,
        requestTopic: config.IDMINT_KAFKA_REQUEST_TOPIC,
        requestRetentionMs: config.IDMINT_KAFKA_REQUEST_RETENTION_MS,
        ...(o.poolTags ? { poolTags: o.poolTags } : {}),
        poolPartitions: o.poolPartitions ?? config.IDMINT_KAFKA_POOL_PARTITIONS,
        replicationFactor: config.IDMINT_KAFKA_REPLICATION_FACTOR,
        namespace: config.IDMINT_KAFKA_NAMESPACE,
      }),
    );
    print(created.length === 0 ? 'all topics already exist' : `created ${created.join(', ')}`);
    const names = kafkaNames(config.IDMINT_KAFKA_NAMESPACE);
    const topics = [config.IDMINT_KAFKA_REQUEST_TOPIC, ...(o.poolTags ?? []).map((tag) => names.poolTopic(tag))];
    for (const f of await underReplicated(admin, topics, config.IDMINT_KAFKA_REPLICATION_FACTOR)) {
      print(`warning: "${f.topic}" has ${f.replicas} replica(s), fewer than ${f.wanted}: raise it with kafka-reassign-partitions`);
    }
  } finally {
    await admin.close();
  }
}

export async function kafkaGet(bizTag: string, o: { count: number; timeout: number; verifyKey?: string }): Promise<void> {
  // The same request topic and namespace as the responders this shell's configuration names.
  const config = loadConfig();
  const verifyKey = o.verifyKey ?? (process.env.IDMINT_VERIFY_KEY || undefined) ?? (await recordedVerifyKeys(config));
  const client = createKafkaClient({
    kafka: cliKafka(),
    clientId: 'idmint-cli',
    requestTopic: config.IDMINT_KAFKA_REQUEST_TOPIC,
    ...(config.IDMINT_KAFKA_NAMESPACE ? { namespace: config.IDMINT_KAFKA_NAMESPACE } : {}),
    verifyKey,
  });
  try {
    for (const id of await reachable(undefined, () => client.getIds(bizTag, o.count, { timeoutMs: o.timeout }))) print(id);
  } finally {
    await client.close();
  }
}

/**
 * The deployment's public keys, read from its record when this shell names its database: a
 * reply is accepted only when the deployment signed it (README "Kafka API").
 */
async function recordedVerifyKeys(config: Config): Promise<string[]> {
  if (!config.DATABASE_URL) {
    throw new BadRequestError(
      'replies are signed by the deployment: pass --verify-key (what `idmint keys public` prints), set IDMINT_VERIFY_KEY, or DATABASE_URL to read it from the deployment record',
      'verifyKey',
    );
  }
  const [{ createPgDatabase }, { PostgresDeploymentRecord, SIGNING_KEYS_SETTING }, { parseSigningKeys, publicKeys }] = await Promise.all([
    import('../store/pg.js'),
    import('../store/deployment-record.js'),
    import('../app/signing.js'),
  ]);
  const db = createPgDatabase({ connectionString: config.DATABASE_URL, schema: config.IDMINT_PG_SCHEMA, max: 1 });
  try {
    const keys = parseSigningKeys(await new PostgresDeploymentRecord(db, 'idmint kafka get').secret(SIGNING_KEYS_SETTING));
    if (!keys) throw new BadRequestError('this deployment has no signing key yet: start a responder (it records one), or pass --verify-key', 'verifyKey');
    return publicKeys(keys);
  } finally {
    await db.close();
  }
}
