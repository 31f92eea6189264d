import { afterEach, describe, expect, it, vi } from 'vitest';
import { EMPTY_PAUSE_MS, installFetchGuard, StoppedConsumerFetch } from '../../../src/kafka/kafkajs/fetch-guard.js';

/**
 * KafkaJS's Runner.fetch, guarded, on a runner whose group fetch answers at once (what a stopped
 * runner, or a fetch recovering from a closed connection, does): a fetcher looping on it must
 * leave the event loop free — a timer set beside it fires.
 */
function runner(running: boolean, batches: unknown[] = []) {
  const proto = installFetchGuard();
  return Object.assign(Object.create(proto) as typeof proto, {
    running,
    logger: { debug: () => undefined },
    consumerGroup: { groupId: 'g', memberId: 'm', fetch: async () => batches },
    instrumentationEmitter: { emit: () => undefined },
    heartbeat: async () => undefined,
  });
}

/** KafkaJS's fetcher loop: fetch until stopped; counts the turns. */
async function fetcherLoop(fetch: () => Promise<unknown[]>, stopped: () => boolean): Promise<{ turns: number; error?: unknown }> {
  let turns = 0;
  try {
    while (!stopped()) {
      await fetch();
      turns++;
    }
  } catch (error) {
    return { turns, error };
  }
  return { turns };
}

describe('the KafkaJS fetch guard', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('installs once: the prototype keeps one wrapper', () => {
    const proto = installFetchGuard();
    const fetch = proto.fetch;
    expect(installFetchGuard().fetch).toBe(fetch);
  });

  it('a stopped runner: its fetcher ends with a retriable error instead of looping', async () => {
    const r = runner(false);
    const { turns, error } = await fetcherLoop(
      () => r.fetch(0),
      () => false,
    );
    expect(turns).toBe(0);
    expect(error).toBeInstanceOf(StoppedConsumerFetch);
    expect((error as StoppedConsumerFetch).retriable).toBe(true);
  });

  it('a running runner whose fetches end empty at once: the loop yields, so a timer beside it fires', async () => {
    const r = runner(true);
    let fired = false;
    setTimeout(() => (fired = true), 300);
    const { turns, error } = await fetcherLoop(
      () => r.fetch(0),
      () => fired,
    );
    expect(error).toBeUndefined();
    expect(fired).toBe(true);
    // Unguarded, this loop never ends: each turn is a resolved promise and the timer never runs.
    expect(turns).toBeLessThanOrEqual(Math.ceil(300 / EMPTY_PAUSE_MS) + 1);
  });

  it('an empty fetch that ended at once waits EMPTY_PAUSE_MS; one with batches does not wait', async () => {
    vi.useFakeTimers();
    let done = false;
    const empty = runner(true)
      .fetch(0)
      .then(() => (done = true));
    await vi.advanceTimersByTimeAsync(EMPTY_PAUSE_MS - 1);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await empty;
    expect(done).toBe(true);
    // No timer needed: resolves while the clock stands still.
    expect(await runner(true, [{ topic: 't' }]).fetch(0)).toEqual([{ topic: 't' }]);
  });
});
