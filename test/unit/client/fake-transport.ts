import type { IdTransport, TransportBatch } from '../../../src/client/index.js';

/**
 * An in-test dispenser: hands out consecutive IDs from `start`, records every ask, and lets a
 * test hold answers (gate), fail them, or answer with fewer IDs than asked.
 */
export class FakeTransport implements IdTransport {
  readonly asks: number[] = [];
  /** Every ID ever handed to the client, to check that none is handed out twice. */
  readonly issued: bigint[] = [];
  closed = 0;
  /** Next answers to fail, in order; each entry is thrown once. */
  failures: Error[] = [];
  /** When set, answers wait for `release()`. */
  hold = false;
  /** Caps the IDs per answer, like a pool running short. */
  cap = Infinity;
  private next: bigint;
  private held: Array<() => void> = [];

  constructor(start = 1n) {
    this.next = start;
  }

  get inFlight(): number {
    return this.held.length;
  }

  async fetch(_bizTag: string, count: number): Promise<TransportBatch> {
    this.asks.push(count);
    if (this.hold) await new Promise<void>((resolve) => this.held.push(resolve));
    else await Promise.resolve();
    const failure = this.failures.shift();
    if (failure) throw failure;
    const ids: string[] = [];
    for (let i = 0; i < Math.min(count, this.cap); i++) {
      this.issued.push(this.next);
      ids.push(String(this.next++));
    }
    return { ids, source: 'pool' };
  }

  release(): void {
    const held = this.held;
    this.held = [];
    for (const r of held) r();
  }

  async close(): Promise<void> {
    this.closed++;
  }
}

/** Lets queued microtasks and promise chains run. */
export async function settle(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await Promise.resolve();
}
