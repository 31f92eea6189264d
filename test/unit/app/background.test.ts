import { describe, expect, it } from 'vitest';
import { startInBackground } from '../../../src/app/background.js';
import { memoryLogger } from '../core/helpers.js';

const started = () => ({
  closed: 0,
  async close() {
    this.closed++;
  },
});

describe('startInBackground', () => {
  it('tries again after a failed start, logs the failures as one episode, and reports the start', async () => {
    const { logger, lines } = memoryLogger();
    let tries = 0;
    const value = started();
    const running = new Promise<void>((resolve) => {
      const background = startInBackground(
        'the test role',
        async () => {
          if (++tries < 3) throw new Error(`down ${tries}`);
          return value;
        },
        { logger, retryMs: 1, onStarted: () => resolve() },
      );
      expect(background.state()).toBe('starting');
    });
    await running;
    expect(tries).toBe(3);
    const warned = lines.filter((l) => l.level === 40).map((l) => l.msg);
    expect(warned).toEqual([expect.stringContaining('the test role could not start; retrying every 1 ms')]);
  });

  it('close() ends the wait between tries at once, and nothing starts after it', async () => {
    const { logger } = memoryLogger();
    let tries = 0;
    // An hour between tries: only the abort can end the wait within the test's timeout.
    const background = startInBackground(
      'the test role',
      async () => {
        tries++;
        throw new Error('down');
      },
      { logger, retryMs: 3_600_000 },
    );
    while (tries === 0) await new Promise((resolve) => setImmediate(resolve));
    await background.close();
    expect(tries).toBe(1);
    expect(background.state()).toBe('starting');
    expect(background.started).toBeUndefined();
  });
});
