import type { Logger } from './logger.js';
import type { Dependency } from './dependency.js';
import { systemClock, type Clock } from './ports.js';

export type { Dependency };

export interface EpisodeOptions {
  /** A failure that lasts is repeated at warn at most this often, with its length so far. Default 60,000 ms. */
  remindEveryMs?: number;
  clock?: Clock;
  /** The server whose outage this is, when always the same (else pass it to `fail`). */
  dependency?: Dependency | undefined;
}

/** The episodes of one server's outage in this process: the first logs, the others join it. */
interface Outage {
  since: number;
  lastWarn: number;
  /** The first episode's sentence: the outage's name in the log. */
  first: string;
  members: Set<Episode>;
  /** What else failed for the same reason (each episode's sentence). */
  affected: Set<string>;
  repeats: number;
}

const outages = new Map<Dependency, Outage>();

/** Whether this process is living through an outage of `dependency` (logged already). */
export function outageUnderWay(dependency: Dependency | undefined): boolean {
  return dependency !== undefined && (outages.get(dependency)?.members.size ?? 0) > 0;
}

/**
 * Logs a recurring failure once per episode: one warn line when it starts (the reason, no stack:
 * an outage is expected), repeats at debug with a warn reminder at most once a minute, and one
 * info line when it is over with the outage's length and how often it recurred. Keeps expected
 * outages (Redis down, Postgres down, a pool running dry) from writing a line per request.
 *
 * Episodes caused by the same server (`dependency`) are one outage per process: a ZooKeeper stop
 * is felt by the client, the fence, the worker-id lease, the segment buffers and the dispenser,
 * and logs one line when it starts (the first to notice), one reminder a minute and one line when
 * the last of them is back, naming what else it affected.
 */
export class Episode {
  private since: number | undefined;
  private lastWarn = 0;
  private repeats = 0;
  /** The outage this episode joined, while it lasts. */
  private joined: Dependency | undefined;
  private readonly remindEveryMs: number;
  private readonly clock: Clock;

  constructor(
    private readonly log: Logger,
    private readonly what: string,
    private readonly options: EpisodeOptions = {},
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

  /** One more failure; `dependency` names the server behind it when the episode's own option does not. */
  fail(fields: Record<string, unknown>, reason: string, dependency: Dependency | undefined = this.options.dependency): void {
    const now = this.clock.now();
    if (this.since === undefined) {
      this.since = now;
      this.lastWarn = now;
      this.repeats = 0;
      if (dependency !== undefined && this.join(dependency, now)) {
        this.log.debug({ ...fields, reason, dependency }, `${this.what} (part of the ${dependency} outage logged already)`);
        return;
      }
      this.log.warn(
        { ...fields, reason, ...(dependency ? { dependency } : {}) },
        `${this.what} (repeats are logged at debug, with a reminder each minute, until it recovers)`,
      );
      return;
    }
    this.repeats++;
    const outage = this.joined === undefined ? undefined : outages.get(this.joined);
    if (outage) outage.repeats++;
    if (now - (outage ? outage.lastWarn : this.lastWarn) >= this.remindEveryMs) {
      if (outage) outage.lastWarn = now;
      else this.lastWarn = now;
      const since = outage?.since ?? this.since;
      const affected = outage && outage.affected.size > 0 ? { affected: [...outage.affected] } : {};
      this.log.warn(
        { ...fields, reason, outageMs: now - since, repeats: outage?.repeats ?? this.repeats, ...affected },
        `${outage?.first ?? this.what}: still failing`,
      );
    } else {
      this.log.debug({ ...fields, reason }, this.what);
    }
  }

  /** Ends the episode, if one is under way; `fields` may say what was served meanwhile. */
  recover(fields: Record<string, unknown> = {}): void {
    if (this.since === undefined) return;
    const now = this.clock.now();
    const own = now - this.since;
    this.since = undefined;
    const dependency = this.joined;
    this.joined = undefined;
    const outage = dependency === undefined ? undefined : outages.get(dependency);
    if (outage) {
      outage.members.delete(this);
      if (outage.members.size > 0) {
        this.log.debug({ ...fields, outageMs: own, dependency }, `${this.what}: recovered (the ${dependency} outage goes on elsewhere)`);
        return;
      }
      outages.delete(dependency!);
      const outageMs = now - outage.since;
      const affected = outage.affected.size > 0 ? { affected: [...outage.affected] } : {};
      this.log.info({ ...fields, dependency, outageMs, repeats: outage.repeats, ...affected }, `${outage.first}: recovered after ${formatMs(outageMs)}`);
      return;
    }
    this.log.info({ ...fields, outageMs: own, repeats: this.repeats }, `${this.what}: recovered after ${formatMs(own)}`);
  }

  /** Joins the outage of `dependency`, or starts it; true when it was under way already. */
  private join(dependency: Dependency, now: number): boolean {
    this.joined = dependency;
    const current = outages.get(dependency);
    if (current && current.members.size > 0) {
      current.members.add(this);
      if (current.first !== this.what) current.affected.add(this.what);
      return true;
    }
    outages.set(dependency, { since: now, lastWarn: now, first: this.what, members: new Set([this]), affected: new Set(), repeats: 0 });
    return false;
  }
}

function formatMs(ms: number): string {
  return ms < 10_000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 100_000 ? 1 : 0)} s`;
}
