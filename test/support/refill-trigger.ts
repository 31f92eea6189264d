import type { RefillReason, RefillTrigger } from '../../src/core/ports.js';

export interface InlineRefillTrigger {
  readonly trigger: RefillTrigger;
  /** Every refill asked for and started, in order. */
  readonly asked: Array<{ bizTag: string; shard: number; reason: RefillReason }>;
  /** Waits for the refills still running. */
  idle(): Promise<void>;
}

/**
 * The refill queue's part for tests and benches that run the refill in process: one refill per
 * tag and shard at a time (a request while one runs is dropped, as BullMQ's deduplication does),
 * and a failed refill is only logged away — the next reading or sweep asks again.
 */
export function inlineRefillTrigger(refill: (bizTag: string, shard: number, reason: RefillReason) => Promise<unknown>): InlineRefillTrigger {
  const running = new Map<string, Promise<unknown>>();
  const asked: InlineRefillTrigger['asked'] = [];
  return {
    asked,
    trigger: {
      async requestRefill(bizTag, shard, reason) {
        const key = `${bizTag}/${shard}`;
        if (running.has(key)) return;
        asked.push({ bizTag, shard, reason });
        const job = refill(bizTag, shard, reason)
          .catch(() => undefined)
          .finally(() => running.delete(key));
        running.set(key, job);
        await job;
      },
    },
    idle: async () => void (await Promise.allSettled(running.values())),
  };
}
