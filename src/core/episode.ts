import type { Logger } from './logger.js';

/**
 * Logs a recurring failure once per episode: the first failure at warn, repeats at debug, and
 * one line when it is over. Keeps expected outages (Redis down, a pool running dry) from
 * writing a stack per request or per reconnect attempt.
 */
export class Episode {
  private failing = false;
  private repeats = 0;

  constructor(
    private readonly log: Logger,
    private readonly what: string,
  ) {}

  get active(): boolean {
    return this.failing;
  }

  fail(fields: Record<string, unknown>, reason: string): void {
    if (this.failing) {
      this.repeats++;
      this.log.debug({ ...fields, reason }, this.what);
      return;
    }
    this.failing = true;
    this.repeats = 0;
    this.log.warn({ ...fields, reason }, `${this.what} (further failures are logged at debug until it recovers)`);
  }

  recover(): void {
    if (!this.failing) return;
    this.failing = false;
    this.log.info({ repeats: this.repeats }, `${this.what}: recovered`);
  }
}
