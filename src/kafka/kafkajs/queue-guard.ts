import { createRequire } from 'node:module';

/**
 * KafkaJS 2.2.4's request queue schedules a check of its pending requests after every answer,
 * throttled or not: with nothing throttled the delay is `-1 - Date.now()` (Node 24 prints a
 * TimeoutNegativeWarning to stderr for each connection, past the logger) and with nothing pending
 * the check is a 1 ms timer that does nothing (tulios/kafkajs#1751, its fix unreleased:
 * tulios/kafkajs#1768). The guard schedules the check only when there is something to check:
 * requests pending (as before, at once or when the throttle ends) or a throttle to wait out.
 * Installed once per process, by the driver's client.
 */

interface RequestQueueLike {
  throttledUntil: number;
  pending: unknown[];
  throttleCheckTimeoutId: NodeJS.Timeout | null;
  checkPendingRequests(): void;
  scheduleCheckPendingRequests(): void;
}

/** KafkaJS's own pause between checks of a throttled queue's pending requests. */
const CHECK_PENDING_REQUESTS_INTERVAL_MS = 10;
const GUARDED = Symbol.for('idmint.kafkajs.queue-guard');
let guarded: RequestQueueLike | undefined;

/** Replaces RequestQueue.prototype.scheduleCheckPendingRequests (once); returns the prototype, for tests. */
export function installQueueGuard(): RequestQueueLike {
  if (guarded) return guarded;
  const RequestQueue = createRequire(import.meta.url)('kafkajs/src/network/requestQueue/index.js') as { prototype: RequestQueueLike & { [GUARDED]?: true } };
  const proto = RequestQueue.prototype;
  if (proto[GUARDED]) return (guarded = proto);
  if (typeof proto.scheduleCheckPendingRequests !== 'function' || typeof proto.checkPendingRequests !== 'function') {
    throw new Error(
      'KafkaJS has no RequestQueue.prototype.scheduleCheckPendingRequests: the queue guard (src/kafka/kafkajs/queue-guard.ts) does not fit this KafkaJS version',
    );
  }
  proto.scheduleCheckPendingRequests = function guardedSchedule(this: RequestQueueLike): void {
    if (this.throttleCheckTimeoutId) return;
    const throttledFor = this.throttledUntil - Date.now();
    if (this.pending.length === 0 && throttledFor <= 0) return;
    const delay = throttledFor > 0 ? throttledFor : CHECK_PENDING_REQUESTS_INTERVAL_MS;
    this.throttleCheckTimeoutId = setTimeout(() => {
      this.throttleCheckTimeoutId = null;
      this.checkPendingRequests();
    }, delay);
  };
  proto[GUARDED] = true;
  return (guarded = proto);
}
