import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { installQueueGuard } from '../../../src/kafka/kafkajs/queue-guard.js';

// KafkaJS's RequestQueue scheduled a timer with delay -1 - Date.now() after every answer (Node 24:
// a TimeoutNegativeWarning per connection on stderr) and a 1 ms check of an empty queue.
describe("the guard on KafkaJS's request queue", () => {
  const queue = (pending: unknown[], throttledUntil: number) => {
    const proto = installQueueGuard();
    let checked = 0;
    const q = Object.assign(Object.create(proto) as ReturnType<typeof installQueueGuard>, {
      pending,
      throttledUntil,
      throttleCheckTimeoutId: null,
      checkPendingRequests: () => void checked++,
    });
    return { q, checked: () => checked };
  };

  it('schedules nothing when nothing is pending and nothing throttled (no negative timeout, no 1 ms loop)', () => {
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.name);
    process.on('warning', onWarning);
    const { q } = queue([], -1);
    q.scheduleCheckPendingRequests();
    process.off('warning', onWarning);
    expect(q.throttleCheckTimeoutId).toBeNull();
    expect(warnings).toEqual([]);
  });

  it('still checks pending requests, and waits out a throttle', async () => {
    const pending = queue([{}], -1);
    pending.q.scheduleCheckPendingRequests();
    expect(pending.q.throttleCheckTimeoutId).not.toBeNull();
    await new Promise((r) => setTimeout(r, 30));
    expect(pending.checked()).toBe(1);
    const throttled = queue([], Date.now() + 20);
    throttled.q.scheduleCheckPendingRequests();
    expect(throttled.q.throttleCheckTimeoutId).not.toBeNull();
    await new Promise((r) => setTimeout(r, 60));
    expect(throttled.checked()).toBe(1);
  });

  it('is installed on the prototype KafkaJS uses', () => {
    const RequestQueue = createRequire(import.meta.url)('kafkajs/src/network/requestQueue/index.js') as { prototype: object };
    expect(installQueueGuard()).toBe(RequestQueue.prototype);
  });
});
