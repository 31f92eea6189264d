import type { Command } from 'commander';
import { BadRequestError } from '../core/errors.js';
import { BIZ_TAG_PATTERN } from '../core/ports.js';
import { REQUEST_TOPIC } from '../kafka/names.js';

function tagList(raw: string): string[] {
  const tags = raw
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t !== '');
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

/** `idmint kafka init` (topics) and `idmint kafka get` (one request/reply round trip). */
export function registerKafkaCommands(program: Command): void {
  const kafka = program.command('kafka').description('Kafka request/reply and pool topics (needs KAFKA_BROKERS)');

  kafka
    .command('init')
    .description(`create ${REQUEST_TOPIC} and the named pool topics idmint.ids.<tag> (the broker never auto-creates them)`)
    .option('--partitions <n>', 'partitions of the request topic (default $IDMINT_KAFKA_PARTITIONS or 4)', positiveInt('--partitions'))
    .option('--pool-tags <tags>', 'comma-separated tags whose pool topics to create', tagList)
    .option(
      '--pool-partitions <n>',
      'partitions per pool topic: the most SDK instances reading one tag (default IDMINT_KAFKA_POOL_PARTITIONS, 16)',
      positiveInt('--pool-partitions'),
    )
    .action(async (o: { partitions?: number; poolTags?: string[]; poolPartitions?: number }) => (await import('./kafka-actions.js')).kafkaInit(o));

  kafka
    .command('get <bizTag>')
    .description('ask the responders for IDs over Kafka and print them, one per line')
    .option('-n, --count <n>', 'how many IDs', positiveInt('--count'), 1)
    .option('--timeout <ms>', 'per-request timeout', positiveInt('--timeout'), 5000)
    .option(
      '--verify-key <keys>',
      "the deployment's public key(s) replies are verified with (default $IDMINT_VERIFY_KEY, else read from the deployment record at $DATABASE_URL)",
    )
    .action(async (bizTag: string, o: { count: number; timeout: number; verifyKey?: string }) => (await import('./kafka-actions.js')).kafkaGet(bizTag, o));
}
