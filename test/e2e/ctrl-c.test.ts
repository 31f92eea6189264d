import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { freePort, untilReady } from '../support/spawn.js';
import { inTerminal } from '../support/terminal.js';

// One Ctrl-C from a terminal stops a server gracefully and exits 0, however it was started: npm
// forwards the signal the terminal already delivered to the server, which took it for a second
// Ctrl-C ("exiting immediately", exit 130) before the repeat window.
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

describe.each(['node bin/idmint.js serve', 'npm start'])('Ctrl-C in a terminal under %s', (command) => {
  it('drains, logs "stopped cleanly" and exits 0', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'idmint-ctrlc-'));
    const port = await freePort();
    const env = {
      ...process.env,
      DATABASE_URL: '',
      REDIS_URL: '',
      KAFKA_BROKERS: '',
      ZK_CONNECT: '',
      IDMINT_DATA_DIR: dataDir,
      IDMINT_PORT: String(port),
      LOG_LEVEL: 'info',
    };
    const terminal = inTerminal(command, { cwd: ROOT, env });
    try {
      await untilReady(`http://127.0.0.1:${port}`, { timeoutMs: 90_000, output: terminal.output });
      terminal.ctrlC();
      const code = await terminal.exited;
      expect(code, `exit code ${code}; the terminal's last lines:\n${terminal.output().split('\n').slice(-25).join('\n')}`).toBe(0);
      expect(terminal.output()).toContain('stopped cleanly');
      expect(terminal.output()).not.toContain('second signal');
    } finally {
      terminal.kill();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
