import { spawn } from 'node:child_process';

export interface TerminalProcess {
  /** Everything the terminal showed (the command's stdout and stderr, with \r\n line ends). */
  output(): string;
  /** Types Ctrl-C: the terminal's line discipline sends SIGINT to its whole foreground group. */
  ctrlC(): void;
  /** The command's exit code (`script -e` passes it on). */
  readonly exited: Promise<number | null>;
  kill(): void;
}

/**
 * Runs a command in a pseudo-terminal (util-linux `script`), as a user's terminal would: a Ctrl-C
 * reaches every process of the foreground job (npm and the server it runs), not only the one a
 * test would `kill`.
 *
 * The command is exec'd: a user's interactive shell puts the job in a process group of its own,
 * and is not signalled. `script` runs the command through `$SHELL -c` (/bin/sh when SHELL is unset,
 * as on CI), and dash does not exec a lone command: left in the job, it took the Ctrl-C itself and
 * exited 130 while npm and the server stopped cleanly with 0.
 */
export function inTerminal(command: string, options: { cwd: string; env: NodeJS.ProcessEnv }): TerminalProcess {
  const child = spawn('script', ['-qfec', `exec ${command}`, '/dev/null'], {
    cwd: options.cwd,
    env: { ...options.env, SHELL: '/bin/sh' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  return {
    output: () => output,
    ctrlC: () => void child.stdin.write('\x03'),
    exited,
    kill: () => void child.kill('SIGKILL'),
  };
}
