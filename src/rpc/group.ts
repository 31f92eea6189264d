import type { Consumer } from 'kafkajs';
import { TimeoutError } from '../core/errors.js';

/**
 * Resolves when the consumer has joined its group (and so has partitions): a request sent
 * before that could be answered before anyone listens. Call before `connect()`/`run()`.
 */
export function waitForGroupJoin(consumer: Consumer, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      stop();
      reject(new TimeoutError('joining the Kafka consumer group', timeoutMs));
    }, timeoutMs);
    const offJoin = consumer.on(consumer.events.GROUP_JOIN, () => {
      stop();
      resolve();
    });
    const offCrash = consumer.on(consumer.events.CRASH, (event) => {
      stop();
      reject(event.payload.error);
    });
    function stop(): void {
      clearTimeout(timer);
      offJoin();
      offCrash();
    }
  });
}
