import { createRequire } from 'node:module';
import { sleep } from '../../core/retry.js';

/**
 * A guard on KafkaJS 2.2.4's consumer fetch loop, which can spin without ever yielding to the
 * event loop and so freeze the whole process at 100% CPU: no timer fires, no socket is read, no
 * HTTP request is answered, and a watchdog cannot act.
 *
 * Seen in CI (test/chaos/kafka-replicated.test.ts, an SDK consumer while the pool topic's leader
 * broker was SIGKILLed) and read in KafkaJS's source: a broker that leaves the cluster makes every
 * fetcher throw a rebalance error; the fetch manager stops them and starts new ones. A consumer
 * stopped meanwhile (its runner's `running` false) leaves those new fetchers running, and each of
 * their fetches returns `[]` at once (`Runner.fetch`: "consumer not running") — a loop of
 * resolved promises that never ends. Other empty fetches that end without I/O (a connection found
 * closed, a broker missing from the metadata) loop the same way until something changes, which
 * nothing can while the loop holds the thread (KafkaJS's known tight loops: tulios/kafkajs#1384,
 * #1387, #1428).
 *
 * The guard wraps `Runner.prototype.fetch` (the one every fetcher awaits): a fetch of a stopped
 * runner waits a moment and fails, so its fetcher ends (the runner's retrier then finds it stopped
 * and schedules nothing); an empty fetch that ended without waiting is followed by a pause, so any
 * other such loop turns at most 1000 / EMPTY_PAUSE_MS times a second and leaves the thread to the
 * rest of the process. A fetch that waited for the broker (up to its maxWaitTime) is untouched.
 * Installed once per process, by every idmint module that makes a consumer.
 */

/** An empty fetch that took less than this did no network round trip. */
export const FAST_EMPTY_MS = 2;
/** Pause after such a fetch. */
export const EMPTY_PAUSE_MS = 50;

interface RunnerLike {
  running: boolean;
  fetch(nodeId: number): Promise<unknown[]>;
}

const GUARDED = Symbol.for('idmint.kafkajs.fetch-guard');
/** The guarded prototype, once installed: later calls (one per consumer made) return it at once. */
let guarded: RunnerLike | undefined;

/** The stopped runner's fetch fails with this (retriable: KafkaJS's retrier then sees the runner stopped). */
export class StoppedConsumerFetch extends Error {
  readonly retriable = true;
  constructor() {
    super('the consumer stopped while its fetchers were being replaced');
    this.name = 'IdmintStoppedConsumerFetch';
  }
}

/** Wraps KafkaJS's Runner.prototype.fetch (once); returns the prototype, for tests. */
export function installFetchGuard(): RunnerLike {
  if (guarded) return guarded;
  // KafkaJS's consumers require this module by relative path: the same file, so the same class.
  const Runner = createRequire(import.meta.url)('kafkajs/src/consumer/runner.js') as { prototype: RunnerLike & { [GUARDED]?: true } };
  const proto = Runner.prototype;
  // Another copy of this module (the server's and the SDK's in one process) may have wrapped it.
  if (proto[GUARDED]) return (guarded = proto);
  const original = proto.fetch;
  if (typeof original !== 'function')
    throw new Error('KafkaJS has no Runner.prototype.fetch: the fetch guard (src/kafka/kafkajs/fetch-guard.ts) does not fit this KafkaJS version');
  proto.fetch = async function guardedFetch(this: RunnerLike, nodeId: number): Promise<unknown[]> {
    if (!this.running) {
      await sleep(EMPTY_PAUSE_MS);
      throw new StoppedConsumerFetch();
    }
    const started = performance.now();
    const batches = await original.call(this, nodeId);
    if (batches.length === 0 && performance.now() - started < FAST_EMPTY_MS) await sleep(EMPTY_PAUSE_MS);
    return batches;
  };
  proto[GUARDED] = true;
  return (guarded = proto);
}
