import { EventEmitter } from 'node:events';
import type { Consumer } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { waitForGroupJoin } from '../../../src/kafka/kafkajs/group.js';

// The two events waitForGroupJoin listens to, emitted as KafkaJS's instrumentation does.
function consumerEvents(): { consumer: Consumer; emit(event: 'join' | 'crash', payload?: object): void } {
  const emitter = new EventEmitter();
  const events = { GROUP_JOIN: 'consumer.group_join', CRASH: 'consumer.crash' };
  const consumer = {
    events,
    on(event: string, listener: (e: unknown) => void) {
      emitter.on(event, listener);
      return () => emitter.off(event, listener);
    },
  } as unknown as Consumer;
  return { consumer, emit: (event, payload = {}) => emitter.emit(event === 'join' ? events.GROUP_JOIN : events.CRASH, { payload }) };
}

describe('waitForGroupJoin', () => {
  it('resolves on the join', async () => {
    const { consumer, emit } = consumerEvents();
    const joined = waitForGroupJoin(consumer, 5_000);
    emit('join');
    await expect(joined).resolves.toBeUndefined();
  });

  it('waits through a crash KafkaJS restarts from, and resolves on the join after it', async () => {
    const { consumer, emit } = consumerEvents();
    const joined = waitForGroupJoin(consumer, 5_000);
    emit('crash', { error: new Error('This server does not host this topic-partition'), restart: true });
    emit('join');
    await expect(joined).resolves.toBeUndefined();
  });

  it('rejects with the error of a crash KafkaJS does not restart from', async () => {
    const { consumer, emit } = consumerEvents();
    const joined = waitForGroupJoin(consumer, 5_000);
    emit('crash', { error: new Error('not authorized'), restart: false });
    await expect(joined).rejects.toThrow('not authorized');
  });

  it('rejects with a TIMEOUT when no join comes', async () => {
    const { consumer } = consumerEvents();
    await expect(waitForGroupJoin(consumer, 20)).rejects.toMatchObject({ code: 'TIMEOUT' });
  });
});
