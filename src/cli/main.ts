import { Command, CommanderError } from 'commander';
import { isIdmintError } from '../core/errors.js';
import { registerClientCommands } from './client-commands.js';
import { packageVersion } from '../app/version.js';
import { registerServeCommand } from './serve.js';
import { registerKafkaCommands } from './kafka.js';
import { registerImportCommands } from './import.js';
import { registerRegionsCommands } from './regions.js';
import { registerDeploymentCommands } from './deployment.js';
import { registerKeysCommands } from './keys.js';

/**
 * The `idmint` command. Each subcommand lives in its own module under src/cli/ and registers
 * itself on the program; this file only assembles them and turns errors into one-line messages.
 */
export function buildProgram(options: { exitOverride?: boolean; write?: (text: string) => void } = {}): Command {
  const program = new Command();
  // Set before the subcommands are added, so they inherit it (tests run the CLI in process).
  if (options.exitOverride) program.exitOverride();
  if (options.write) program.configureOutput({ writeOut: options.write, writeErr: options.write });
  program
    .name('idmint')
    .description('Distributed ID dispenser: segments, pools, refills, Kafka request/reply, Snowflake fallback')
    .version(packageVersion())
    .showHelpAfterError('(run `idmint --help` for the list of commands)');
  registerServeCommand(program);
  registerClientCommands(program);
  registerKafkaCommands(program);
  registerImportCommands(program);
  registerRegionsCommands(program);
  registerDeploymentCommands(program);
  registerKeysCommands(program);
  return program;
}

export async function main(argv: string[] = process.argv, program: Command = buildProgram()): Promise<void> {
  try {
    await program.parseAsync(argv);
  } catch (err) {
    // With exitOverride, commander has already written its own one-line message (or the help).
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode;
      return;
    }
    // A user's mistake is one line that says what to do; only real faults print a stack.
    if (isIdmintError(err)) {
      process.stderr.write(`idmint: ${err.code}: ${err.message}\n`);
    } else {
      process.stderr.write(`idmint: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    }
    process.exitCode = 1;
  }
}
