import type { Logger } from '../core/logger.js';

/**
 * What both drivers' topic writers need around their library's producer (src/kafka/kafkajs,
 * src/kafka/platformatic): sends to one topic one at a time (an append-once writer), and producers
 * that were replaced kept open a while so sends in flight on them can finish.
 */

/** Sends to one topic one after another: each starts once the topic's previous send settled. */
export class PerTopicSends {
  private readonly tails = new Map<string, Promise<unknown>>();

  run(topic: string, send: () => Promise<void>): Promise<void> {
    const sent = (this.tails.get(topic) ?? Promise.resolve()).catch(() => undefined).then(send);
    this.tails.set(topic, sent);
    const forget = (): void => {
      if (this.tails.get(topic) === sent) this.tails.delete(topic);
    };
    sent.then(forget, forget);
    return sent;
  }
}

/** Replaced producers: each closed `lingerMs` after it was replaced, or all at once by `takeAll` (the writer closing). */
export class RetiredProducers<P> {
  private readonly retired = new Set<P>();

  constructor(
    private readonly close: (producer: P) => Promise<void>,
    private readonly logger: Logger,
    private readonly lingerMs = 5000,
  ) {}

  add(producer: P): void {
    this.retired.add(producer);
    setTimeout(() => {
      if (!this.retired.delete(producer)) return;
      this.close(producer).catch((err: unknown) => this.logger.debug({ err }, 'closing a replaced producer failed'));
    }, this.lingerMs).unref();
  }

  /** The producers not closed yet; the caller closes them. */
  takeAll(): P[] {
    const all = [...this.retired];
    this.retired.clear();
    return all;
  }
}
