import type { Logger } from './logger.js';
import { systemClock, type Clock } from './ports.js';

export interface EpisodeOptions {
  /** A failure that lasts is repeated at warn at most this often, with its length so far. Default 60,000 ms. */
  remindEveryMs?: number;
  clock?: Clock;
}

/**
 * Logs a recurring failure once per episode: one warn line when it starts (the reason, no stack:
 * an outage is expected), repeats at debug with a warn reminder at most once a minute, and one
 * info line when it is over with the outage's length and how often it recurred. Keeps expected
 * outages (Redis down, Postgres down, a pool running dry) from writing a line per request.
 */
export class Episode {
  private since: number | undefined;
  private lastWarn = 0;
  private repeats = 0;
  private readonly remindEveryMs: number;
  private readonly clock: Clock;

  constructor(
    private readonly log: Logger,
    private readonly what: string,
    options: EpisodeOptions = {},
  ) {
    this.remindEveryMs = options.remindEveryMs ?? 60_000;
    this.clock = options.clock ?? systemClock;
  }

  get active(): boolean {
    return this.since !== undefined;
  }

  /** Milliseconds since the episode began, or 0 when none is under way. */
  get lengthMs(): number {
    return this.since === undefined ? 0 : this.clock.now() - this.since;
  }

  fail(fields: Record<string, unknown>, reason: string): void {
    const now = this.clock.now();
    if (this.since === undefined) {
      this.since = now;
      this.lastWarn = now;
      this.repeats = 0;
      this.log.warn({ ...fields, reason }, `${this.what} (repeats are logged at debug, with a reminder each minute, until it recovers)`);
      return;
    }
    this.repeats++;
    if (now - this.lastWarn >= this.remindEveryMs) {
      this.lastWarn = now;
      this.log.warn({ ...fields, reason, outageMs: now - this.since, repeats: this.repeats }, `${this.what}: still failing`);
    } else {
      this.log.debug({ ...fields, reason }, this.what);
    }
  }

  /** Ends the episode, if one is under way; `fields` may say what was served meanwhile. */
  recover(fields: Record<string, unknown> = {}): void {
    if (this.since === undefined) return;
    const outageMs = this.clock.now() - this.since;
    this.since = undefined;
    this.log.info({ ...fields, outageMs, repeats: this.repeats }, `${this.what}: recovered after ${formatMs(outageMs)}`);
  }
}

function formatMs(ms: number): string {
  return ms < 10_000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 100_000 ? 1 : 0)} s`;
}
