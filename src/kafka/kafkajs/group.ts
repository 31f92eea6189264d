import type { Consumer } from 'kafkajs';
import { TimeoutError } from '../../core/errors.js';

/**
 * Resolves when the consumer has joined its group (and so has partitions): a request sent
 * before that could be answered before anyone listens. Call before `connect()`/`run()`.
 * A crash KafkaJS restarts from (a retriable error, e.g. a topic created a moment ago that a
 * busy broker does not host yet) is not a failure: the join may still come before the deadline.
 */
export function waitForGroupJoin(consumer: Consumer, timeoutMs: number): Promise<void> {
  const joined = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      stop();
      reject(new TimeoutError('joining the Kafka consumer group', timeoutMs));
    }, timeoutMs);
    timer.unref();
    const offJoin = consumer.on(consumer.events.GROUP_JOIN, () => {
      stop();
      resolve();
    });
    const offCrash = consumer.on(consumer.events.CRASH, (event) => {
      if (event.payload.restart) return;
      stop();
      reject(event.payload.error);
    });
    function stop(): void {
      clearTimeout(timer);
      offJoin();
      offCrash();
    }
  });
  // If connect() fails first, nobody awaits this promise: its later rejection must not crash the process.
  joined.catch(() => undefined);
  return joined;
}
