import { afterEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../../src/core/logger.js';
import { PerTopicSends, RetiredProducers } from '../../../src/kafka/writer-parts.js';

describe('the Kafka writers’ shared parts', () => {
  afterEach(() => vi.useRealTimers());

  it('sends to one topic one at a time, in order, a failed one not holding up the next; other topics run beside', async () => {
    const sends = new PerTopicSends();
    const log: string[] = [];
    const gates = new Map<string, () => void>();
    const send =
      (name: string, fail = false) =>
      () =>
        new Promise<void>((resolve, reject) => {
          log.push(`start ${name}`);
          gates.set(name, () => (fail ? reject(new Error(name)) : resolve()));
        });
    const a1 = sends.run('a', send('a1', true));
    const a2 = sends.run('a', send('a2'));
    const b1 = sends.run('b', send('b1'));
    await Promise.resolve();
    await Promise.resolve();
    expect(log).toEqual(['start a1', 'start b1']);
    gates.get('a1')!();
    await expect(a1).rejects.toThrow('a1');
    await vi.waitFor(() => expect(log).toContain('start a2'));
    gates.get('a2')!();
    gates.get('b1')!();
    await Promise.all([a2, b1]);
  });

  it('closes a replaced producer after its linger, or hands it over at once to a closing writer', async () => {
    vi.useFakeTimers();
    const closed: string[] = [];
    const retired = new RetiredProducers<string>(async (p) => void closed.push(p), silentLogger, 5000);
    retired.add('old');
    retired.add('older');
    await vi.advanceTimersByTimeAsync(4999);
    expect(closed).toEqual([]);
    expect(retired.takeAll().sort()).toEqual(['old', 'older']);
    await vi.advanceTimersByTimeAsync(1);
    // Taken by the closing writer: not closed a second time here.
    expect(closed).toEqual([]);
    retired.add('next');
    await vi.advanceTimersByTimeAsync(5000);
    expect(closed).toEqual(['next']);
  });
});
