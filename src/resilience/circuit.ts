import CircuitBreaker from 'opossum';
import { Episode, type Dependency } from '../core/episode.js';
import { IdmintError } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { checkInteger, defaults, resolveOptions } from '../core/options.js';

export interface CircuitOptions {
  /** What the circuit guards, as a sentence's subject: "Postgres", "the segment fence (ZooKeeper)". */
  name: string;
  /** Which failures mean the server is not there (they open the circuit); others pass through and count as answers. */
  isOutage: (err: unknown) => boolean;
  /** Run in the background once the circuit has been open `probeEveryMs`: success closes it. Callers never wait on it. */
  probe: () => Promise<unknown>;
  /** How long the circuit stays open before the next probe. Default 1000 ms. */
  probeEveryMs?: number;
  logger?: Logger;
  /** Told on every change (for a gauge). */
  onChange?: (open: boolean) => void;
  /**
   * When the circuit opens, calls already waiting on the server fail at once too (their
   * operation runs on, its outcome ignored). Only for servers where an outcome never learned is
   * safe: a read, or a claim whose loss leaves a gap. Default false.
   */
  abandonOnOpen?: boolean;
  /** The server behind it: its outage is logged once per process (core/episode.ts), and errors say so. */
  dependency?: Dependency;
}

const CIRCUIT_DEFAULTS = defaults({ probeEveryMs: 1000, abandonOnOpen: false });

/**
 * A circuit around one server a request waits on (opossum underneath). Closed, calls go through.
 * The first failure that means the server is not there (or `trip`, when a client's own events
 * say so) opens it: every call then fails at once with NOT_READY and a `retryAfterMs`, so a
 * request falls back (or answers 503 with Retry-After) instead of waiting out a timeout. While
 * open, one probe in flight at a time, never a caller's request, looks for the server every
 * `probeEveryMs`; its success (or `reset`) closes the circuit. opossum's half-open state would
 * let the next caller through as the trial (and wait out the server's timeout): here it only
 * starts the probe and the circuit stays open. One log episode per outage: lost, a reminder each
 * minute, back with its length.
 */
export class Circuit {
  private readonly breaker: CircuitBreaker<[() => Promise<unknown>], unknown>;
  private readonly episode: Episode;
  private readonly o: Readonly<typeof CIRCUIT_DEFAULTS & Omit<CircuitOptions, 'logger'>>;
  /** When this outage began (0 while closed): re-opening after a failed probe does not reset it. */
  private openedAt = 0;
  private probing = false;
  private closed = false;
  private readonly waiting = new Set<(err: Error) => void>();

  constructor(options: CircuitOptions) {
    const { logger = silentLogger, ...rest } = options;
    this.o = resolveOptions(CIRCUIT_DEFAULTS, rest, (o) => checkInteger('circuit', o, 'probeEveryMs', 1));
    this.episode = new Episode(logger, `${options.name} is unreachable; requests that need it fall back at once while a probe looks for it`, {
      dependency: options.dependency,
    });
    this.breaker = new CircuitBreaker((fn: () => Promise<unknown>) => fn(), {
      name: options.name,
      // Each client has its own per-call deadline; the circuit adds none.
      timeout: false,
      // One outage failure opens it: a server known to be gone is not asked again by every request.
      errorThresholdPercentage: 0,
      volumeThreshold: 0,
      resetTimeout: this.o.probeEveryMs,
      // Failures that are answers (a SQL error, a version conflict) say the server is there.
      errorFilter: (err: unknown) => !this.o.isOutage(err),
    });
    this.breaker.on('open', () => {
      if (this.openedAt !== 0) return;
      this.openedAt = Date.now();
      this.o.onChange?.(true);
      for (const abandon of this.waiting) abandon(this.openError());
    });
    this.breaker.on('close', () => {
      this.openedAt = 0;
      this.episode.recover();
      this.o.onChange?.(false);
    });
    this.breaker.on('failure', (err: unknown) => this.episode.fail({}, (err as Error).message));
    // Half-open lets the next call through as a trial: back to open at once (no caller is the
    // trial; this also restarts the period), and the probe looks instead.
    this.breaker.on('halfOpen', () => {
      this.breaker.open();
      void this.runProbe();
    });
  }

  /** True while the server is known to be unreachable. */
  get isOpen(): boolean {
    return !this.breaker.closed;
  }

  /** For /readyz. */
  health(): { ok: boolean; message?: string } {
    if (!this.isOpen) return { ok: true };
    return {
      ok: false,
      message: `${this.o.name} is unreachable (for ${Math.round((Date.now() - this.openedAt) / 1000)} s); requests that need it fall back at once`,
    };
  }

  /** Runs `fn` unless the server is known to be unreachable, then fails at once with NOT_READY. */
  async run<T>(fn: () => Promise<T>): Promise<T> {
    // Shut down with its owner: the owner's own "closed" answer is the one to give.
    if (this.closed) return fn();
    const fired = this.breaker.fire(fn) as Promise<T>;
    let abandon: ((err: Error) => void) | undefined;
    try {
      if (!this.o.abandonOnOpen) return await fired;
      const abandoned = new Promise<never>((_, reject) => this.waiting.add((abandon = reject)));
      return await Promise.race([fired, abandoned]);
    } catch (err) {
      if ((err as { code?: unknown }).code === 'EOPENBREAKER') throw this.openError();
      throw err;
    } finally {
      if (abandon) this.waiting.delete(abandon);
    }
  }

  /** The server is known to be gone (a client's own event): open now, without waiting for a call to fail. */
  trip(reason: string): void {
    if (this.closed || this.isOpen) return;
    this.episode.fail({}, reason);
    this.breaker.open();
  }

  /** The server is known to be back (a client's own event). */
  reset(): void {
    if (!this.closed && this.isOpen) this.breaker.close();
  }

  /** Stops the breaker's timers. Idempotent. */
  shutdown(): void {
    if (this.closed) return;
    this.closed = true;
    this.breaker.shutdown();
  }

  private openError(): IdmintError {
    const retryAfterMs = this.o.probeEveryMs;
    return new IdmintError('NOT_READY', `${this.o.name} is unreachable (for ${Math.round((Date.now() - this.openedAt) / 1000)} s); not waiting for it`, {
      details: { retryAfterMs, ...(this.o.dependency ? { dependency: this.o.dependency } : {}) },
    });
  }

  private async runProbe(): Promise<void> {
    if (this.probing || this.closed) return;
    this.probing = true;
    try {
      await this.o.probe();
      this.reset();
    } catch (err) {
      // An answer that is not an outage (a SQL error) still says the server is there.
      if (!this.o.isOutage(err)) this.reset();
      else this.episode.fail({}, (err as Error).message);
    } finally {
      this.probing = false;
    }
  }
}
