import type { Command } from 'commander';
import { DEPLOYMENT_SETTINGS, judge, RECORDED_SETTINGS, settingRule, type DeploymentSetting, type DeploymentView } from '../core/deployment.js';
import { BadRequestError, IdmintError } from '../core/errors.js';
import type { Database } from '../store/db.js';
import { openDatabase, type DatabaseFlags } from './open-db.js';
import type { LiveProcess } from '../store/deployment-record.js';

const say = (line: string): void => void process.stdout.write(`${line}\n`);

/** Processes that reported within this are live (they report every IDMINT_DEPLOYMENT_CHECK_MS, 5 s by default). */
const LIVE_MS = 15_000;

type Flags = DatabaseFlags;

const open = (flags: Flags): Promise<Database> => openDatabase(flags, 'the deployment record lives');

/** The settings a live process holds that differ from the record, in a few words. */
function differences(record: Awaited<ReturnType<RecordReader['read']>>, process: LiveProcess): string[] {
  return judge(record, process.view, record.values).map((d) => `${d.setting} (${d.mine})`);
}

interface RecordReader {
  read(): Promise<{ values: DeploymentView; ever: ReadonlySet<DeploymentSetting>; recordedAt: Map<string, Date> }>;
}

function printLive(record: Awaited<ReturnType<RecordReader['read']>>, live: readonly LiveProcess[]): void {
  if (live.length === 0) return say(`no live process (none reported in the last ${LIVE_MS / 1000} s)`);
  say(`live processes (reported in the last ${LIVE_MS / 1000} s):`);
  for (const p of live) {
    const differ = differences(record, p);
    say(`  ${p.address.padEnd(24)} ${p.roles.padEnd(22)} ${differ.length === 0 ? 'agrees' : `differs: ${differ.join(', ')}`}`);
  }
}

/** `idmint deployment show|set`: the deployment record (src/core/deployment.ts) and who holds what. */
export function registerDeploymentCommands(program: Command): void {
  const deployment = program
    .command('deployment')
    .description('the settings every process of a deployment must share (its record in Postgres), and which live processes hold them');
  const target = (command: Command): Command =>
    command
      .option('--url <url>', "the deployment's Postgres (default $DATABASE_URL)")
      .option('--schema <name>', "Postgres schema of idmint's tables (default $IDMINT_PG_SCHEMA)");

  target(deployment.command('show').description('print the record and what each live process holds')).action(async (flags: Flags) => {
    const db = await open(flags);
    try {
      const { PostgresDeploymentRecord } = await import('../store/deployment-record.js');
      const record = new PostgresDeploymentRecord(db, 'idmint deployment show');
      const state = await record.read();
      say('deployment record:');
      for (const setting of DEPLOYMENT_SETTINGS) {
        const value = state.values[setting];
        const at = state.recordedAt.get(setting);
        const shown =
          value ??
          (state.ever.has(setting) ? 'REMOVED (restore it with `idmint deployment set`)' : '(not recorded yet: the first process that uses it records it)');
        say(`  ${setting.padEnd(28)} ${shown}${at ? `   since ${at.toISOString()}` : ''}`);
      }
      printLive(state, await record.live(LIVE_MS));
    } finally {
      await db.close();
    }
  });

  target(
    deployment
      .command('set <setting> [value]')
      .description('change a setting for the whole deployment (stop the processes that hold the old value, or they refuse what depends on it)')
      .option(
        '--from-env',
        "take the value this command's own environment gives (e.g. IDMINT_OBFUSCATION_KEY, ZK_CONNECT), as a process started with it would hold it",
      )
      .option('--remove', 'remove the setting from the record (the next process that uses it records its own)'),
  ).action(async (setting: string, value: string | undefined, flags: Flags & { fromEnv?: boolean; remove?: boolean }) => {
    if (!(RECORDED_SETTINGS as readonly string[]).includes(setting)) {
      throw new BadRequestError(
        `"${setting}" is not a setting of the record; one of ${RECORDED_SETTINGS.join(', ')} (the region split is changed with \`idmint regions apply\`)`,
        'setting',
      );
    }
    const name = setting as DeploymentSetting;
    const given = [value !== undefined, flags.fromEnv === true, flags.remove === true].filter(Boolean).length;
    if (given !== 1) throw new BadRequestError('give exactly one of: a value, --from-env, --remove', 'value');
    const next = flags.remove ? undefined : (value ?? (await fromEnv(name)));
    const db = await open(flags);
    try {
      const { PostgresDeploymentRecord } = await import('../store/deployment-record.js');
      const record = new PostgresDeploymentRecord(db, 'idmint deployment set');
      const before = await record.set(name, next);
      say(`${name}: ${before ?? '(none)'} -> ${next ?? '(removed)'}`);
      const state = await record.read();
      const holding = (await record.live(LIVE_MS)).filter((p) => p.view[name] !== undefined && p.view[name] !== next);
      if (holding.length === 0) return say('no live process holds another value');
      say(
        `${holding.length} live process(es) still hold another value; until restarted with ${settingRule(name).variables} as recorded, they refuse what depends on it:`,
      );
      printLive(state, holding);
    } finally {
      await db.close();
    }
  });
}

/** The value this command's environment gives, as a serving process started with it would hold it. */
async function fromEnv(setting: DeploymentSetting): Promise<string> {
  const [{ loadConfig }, { deploymentView }] = await Promise.all([import('../app/config.js'), import('../app/deployment.js')]);
  const config = loadConfig(process.env);
  const view = deploymentView(config, { serving: true, zkAuth: config.IDMINT_ZK_AUTH ?? null });
  const value = view[setting];
  if (value === undefined || value === 'not set')
    throw new IdmintError('BAD_REQUEST', `this environment gives no ${setting}: set ${settingRule(setting).variables} for --from-env, or pass the value`);
  return value;
}
