import type { Command } from 'commander';
import { loadConfig } from '../config.js';
import { BadRequestError, IdmintError } from '../core/errors.js';
import { BIZ_TAG_PATTERN } from '../core/types.js';
import { createLogger } from '../log.js';
import { createKafka } from '../rpc/kafka.js';
import { createKafkaClient } from '../rpc/client.js';
import { REQUEST_TOPIC, initTopics } from '../rpc/topics.js';

const print = (line: string): void => void process.stdout.write(`${line}\n`);

function tagList(raw: string): string[] {
  const tags = raw.split(',').map((t) => t.trim()).filter((t) => t !== '');
  const bad = tags.find((t) => !BIZ_TAG_PATTERN.test(t));
  if (bad !== undefined) throw new BadRequestError(`invalid biz tag "${bad}" in --pool-tags`, 'pool-tags');
  return tags;
}

function positiveInt(name: string) {
  return (raw: string): number => {
    if (!/^\d+$/.test(raw) || Number(raw) < 1) throw new BadRequestError(`${name} must be a positive integer, got "${raw}"`, name);
    return Number(raw);
  };
}

/** The CLI's Kafka: quiet (a person reads one line, not KafkaJS's retries) and quick to give up. */
function cliKafka() {
  return createKafka({
    brokers: brokersFromEnv(),
    clientId: 'idmint-cli',
    logger: createLogger({ level: 'silent' }),
    config: { retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 500 }, connectionTimeout: 2000 },
  });
}

/** A broker that cannot be reached is one line that says what to check. */
async function reachable<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof IdmintError) throw err;
    const cause = err as { name?: string; message?: string };
    if ((cause.name ?? '').startsWith('KafkaJS')) {
      throw new IdmintError('NOT_READY', `cannot reach Kafka at ${process.env.KAFKA_BROKERS}: ${cause.message ?? String(err)}; check KAFKA_BROKERS (\`npm run infra:up\` starts a local one)`, { cause: err });
    }
    throw err;
  }
}

function brokersFromEnv(): string {
  const config = loadConfig();
  if (!config.KAFKA_BROKERS) throw new IdmintError('BAD_REQUEST', 'KAFKA_BROKERS is not set (host:port[,host:port]); `npm run infra:up` writes it to .infra/env');
  return config.KAFKA_BROKERS;
}

/** `idmint kafka init` (topics) and `idmint kafka get` (one request/reply round trip). */
export function registerKafkaCommands(program: Command): void {
  const kafka = program.command('kafka').description('Kafka request/reply and pool topics (needs KAFKA_BROKERS)');

  kafka
    .command('init')
    .description(`create ${REQUEST_TOPIC} and the named pool topics idmint.ids.<tag> (the broker never auto-creates them)`)
    .option('--partitions <n>', 'partitions of the request topic (default $IDMINT_KAFKA_PARTITIONS or 4)', positiveInt('--partitions'))
    .option('--pool-tags <tags>', 'comma-separated tags whose pool topics to create', tagList)
    .option('--pool-partitions <n>', 'partitions per pool topic (default 2)', positiveInt('--pool-partitions'))
    .action(async (o: { partitions?: number; poolTags?: string[]; poolPartitions?: number }) => {
      const config = loadConfig();
      const admin = cliKafka().admin();
      await reachable(() => admin.connect());
      try {
        const created = await reachable(() => initTopics(admin, {
          requestPartitions: o.partitions ?? config.IDMINT_KAFKA_PARTITIONS,
          ...(o.poolTags ? { poolTags: o.poolTags } : {}),
          ...(o.poolPartitions ? { poolPartitions: o.poolPartitions } : {}),
        }));
        print(created.length === 0 ? 'all topics already exist' : `created ${created.join(', ')}`);
      } finally {
        await admin.disconnect();
      }
    });

  kafka
    .command('get <bizTag>')
    .description('ask the responders for IDs over Kafka and print them, one per line')
    .option('-n, --count <n>', 'how many IDs', positiveInt('--count'), 1)
    .option('--timeout <ms>', 'per-request timeout', positiveInt('--timeout'), 5000)
    .action(async (bizTag: string, o: { count: number; timeout: number }) => {
      const client = createKafkaClient({ kafka: cliKafka(), clientId: 'idmint-cli' });
      try {
        for (const id of await reachable(() => client.getIds(bizTag, o.count, { timeoutMs: o.timeout }))) print(id);
      } finally {
        await client.close();
      }
    });
}
