import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DROPPED_MESSAGE, settleDroppedCommands } from '../../../src/redis/dropped-commands.js';
import { until } from '../../support/poll.js';
import { startPrivateServer, type PrivateServer } from '../../support/servers.js';

/**
 * A command in flight when Redis dies, on a client that must not resend it (the pools' clients:
 * a push that may have run must fail, never run twice). ioredis leaves it pending forever
 * (redis/ioredis#2193): after a Redis restart the refill worker's slots hung on such commands and
 * pools were never refilled (the redis-fallback e2e, 1 run in ~20). Real Redis, SIGKILLed.
 */
describe('commands dropped by a Redis restart', () => {
  let server: PrivateServer;

  beforeAll(async () => {
    server = await startPrivateServer('redis');
  });

  afterAll(async () => {
    await server?.close();
  });

  /** A BLPOP in flight on `client` across a Redis SIGKILL and restart: how it ended, once the client is ready again. */
  async function blpopAcrossRestart(client: Redis): Promise<string> {
    client.on('error', () => undefined);
    await client.ping();
    let outcome = 'pending';
    void client.blpop('nothing-here', 30).then(
      () => (outcome = 'resolved'),
      (err: Error) => (outcome = `rejected: ${err.message}`),
    );
    await new Promise((r) => setTimeout(r, 200));
    await server.kill();
    await server.start();
    await until('the client ready again', () => client.status === 'ready', { timeoutMs: 30_000 });
    await client.ping();
    await new Promise((r) => setTimeout(r, 200));
    client.disconnect();
    return outcome;
  }

  it('without the fix ioredis never settles it (the bug this works around)', async () => {
    expect(await blpopAcrossRestart(new Redis(server.url, { autoResendUnfulfilledCommands: false, maxRetriesPerRequest: null }))).toBe('pending');
  });

  it("settleDroppedCommands rejects it, on the client and on its duplicates (BullMQ's blocking connection)", async () => {
    const client = settleDroppedCommands(new Redis(server.url, { autoResendUnfulfilledCommands: false, maxRetriesPerRequest: null }));
    expect(await blpopAcrossRestart(client)).toBe(`rejected: ${DROPPED_MESSAGE}`);
    expect(await blpopAcrossRestart(client.duplicate())).toBe(`rejected: ${DROPPED_MESSAGE}`);
  });
});
