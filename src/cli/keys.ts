import type { Command } from 'commander';
import { IdmintError } from '../core/errors.js';
import { generateSigningKey } from '../kafka/signing.js';
import type { Database } from '../store/db.js';
import { openDatabase, type DatabaseFlags } from './open-db.js';
import type { SigningKeys } from '../app/signing.js';

const say = (line: string): void => void process.stdout.write(`${line}\n`);
const tell = (line: string): void => void process.stderr.write(`${line}\n`);

type Flags = DatabaseFlags;

const open = (flags: Flags): Promise<Database> => openDatabase(flags, 'the signing keys live in the deployment record');

async function withKeys<T>(flags: Flags, fn: (io: Awaited<ReturnType<typeof keysIo>>) => Promise<T>): Promise<T> {
  const db = await open(flags);
  try {
    return await fn(await keysIo(db));
  } finally {
    await db.close();
  }
}

async function keysIo(db: Database) {
  const [{ PostgresDeploymentRecord, SIGNING_KEYS_SETTING }, signing] = await Promise.all([
    import('../store/deployment-record.js'),
    import('../app/signing.js'),
  ]);
  const record = new PostgresDeploymentRecord(db, 'idmint keys');
  const read = async () => signing.parseSigningKeys(await record.secret(SIGNING_KEYS_SETTING));
  const write = async (keys: SigningKeys) =>
    record.setSecretWith(SIGNING_KEYS_SETTING, JSON.stringify(keys), 'signing-key-id', signing.kidOfEntry(keys.current));
  return { read, write, signing };
}

/**
 * `idmint keys public|generate|rotate|retire`: the deployment's Ed25519 signing keys (README "Kafka
 * API"). A rotation keeps two keys valid at once: `rotate` publishes a next key (consumers accept
 * it; it signs nothing yet), `rotate --promote` makes it sign, and `retire` drops the previous one
 * once no block it signed is left unread.
 */
export function registerKeysCommands(program: Command): void {
  const keys = program.command('keys').description("the deployment's signing keys: Kafka pool blocks and replies are signed, SDKs verify with the public key");
  const target = (command: Command): Command =>
    command
      .option('--url <url>', "the deployment's Postgres (default $DATABASE_URL)")
      .option('--schema <name>', "Postgres schema of idmint's tables (default $IDMINT_PG_SCHEMA)");

  target(
    keys
      .command('public')
      .description('print the public keys SDKs verify with (verifyKey, IDMINT_VERIFY_KEY): the current one first, then any next or previous'),
  ).action(async (flags: Flags) => {
    await withKeys(flags, async ({ read, signing }) => {
      const recorded = await read();
      if (!recorded)
        throw new IdmintError(
          'NOT_READY',
          'this deployment has no signing key yet: the first process that signs (a refill with Kafka, or a responder) records one; or run `idmint keys rotate`',
        );
      for (const key of signing.publicKeys(recorded)) say(key);
      tell('give these to the SDKs as verifyKey, or IDMINT_VERIFY_KEY="$(idmint keys public)"');
    });
  });

  keys
    .command('generate')
    .description('print a new secret key for IDMINT_SIGNING_KEY (and its public key on stderr); changes nothing')
    .action(() => {
      const key = generateSigningKey();
      say(key.secretKey);
      tell(`public key: ${key.publicKey}`);
    });

  target(
    keys
      .command('rotate')
      .description('publish a next key (accepted by consumers, signing nothing yet); with --promote, make the published next key sign')
      .option('--promote', 'the next key signs from now on; the current one stays accepted as the previous until `idmint keys retire`'),
  ).action(async (flags: Flags & { promote?: boolean }) => {
    await withKeys(flags, async ({ read, write, signing }) => {
      const recorded = await read();
      if (!flags.promote) {
        if (recorded?.next) return say(`a next key is published already: ${recorded.next.public}\nrun \`idmint keys rotate --promote\` once every SDK has it`);
        const next = signing.entryOf(generateSigningKey(), true);
        if (!recorded) {
          await write({ current: next });
          return say(`recorded the deployment's first signing key: ${next.public}`);
        }
        if (recorded.previous)
          throw new IdmintError(
            'BAD_REQUEST',
            'a previous key is still accepted: run `idmint keys retire` before publishing another (consumers accept three keys at most)',
          );
        await write({ ...recorded, next });
        say(`published the next key: ${next.public}`);
        say('give every SDK the keys `idmint keys public` prints now (the next key is among them), then run `idmint keys rotate --promote`');
        return;
      }
      if (!recorded?.next) throw new IdmintError('BAD_REQUEST', 'no next key is published: run `idmint keys rotate` first, and give its key to every SDK');
      await write({ current: recorded.next, previous: { public: recorded.current.public } });
      say(
        `the key ${signing.kidOfEntry(recorded.next)} signs from now on (processes switch within IDMINT_DEPLOYMENT_CHECK_MS); ${signing.kidOfEntry(recorded.current)} stays accepted as the previous key`,
      );
      say('when no block it signed is left unread (pool topics keep blocks a day), run `idmint keys retire`');
    });
  });

  target(keys.command('retire').description('stop publishing the previous key (once no block it signed is left unread)')).action(async (flags: Flags) => {
    await withKeys(flags, async ({ read, write, signing }) => {
      const recorded = await read();
      if (!recorded?.previous) return say('no previous key to retire');
      await write({ current: recorded.current, ...(recorded.next ? { next: recorded.next } : {}) });
      say(`retired ${signing.kidOfEntry(recorded.previous)}; SDKs may drop it from their verify keys`);
    });
  });
}
