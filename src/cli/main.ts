import { Command } from 'commander';
import { isIdmintError } from '../core/errors.js';
import { registerClientCommands } from './client-commands.js';
import { registerServeCommand } from './serve.js';
import { registerKafkaCommands } from './kafka.js';

/**
 * The `idmint` command. Each subcommand lives in its own module under src/cli/ and registers
 * itself on the program; this file only assembles them and turns errors into one-line messages.
 */
export function buildProgram(): Command {
  const program = new Command();
  program
    .name('idmint')
    .description('Distributed ID dispenser: segments, pools, refills, Kafka request/reply, Snowflake fallback')
    .version('0.1.0')
    .showHelpAfterError('(run `idmint --help` for the list of commands)');
  registerServeCommand(program);
  registerClientCommands(program);
  registerKafkaCommands(program);
  return program;
}

export async function main(argv: string[] = process.argv): Promise<void> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
  } catch (err) {
    // A user's mistake is one line that says what to do; only real faults print a stack.
    if (isIdmintError(err)) {
      process.stderr.write(`idmint: ${err.code}: ${err.message}\n`);
    } else {
      process.stderr.write(`idmint: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    }
    process.exitCode = 1;
  }
}
