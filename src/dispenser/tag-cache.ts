import { BoundedCache } from '../core/bounded-cache.js';
import { Episode } from '../core/episode.js';
import { dependencyOf } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { systemClock, type BizStore, type BizTag, type Clock } from '../core/ports.js';
import { checkInteger, defaults, resolveOptions } from '../core/options.js';

export interface TagCacheOptions {
  store: Pick<BizStore, 'getBiz'>;
  /** No settings older than this are used while Postgres answers; changes reach every process within it. Default 1000 ms. */
  ttlMs?: number;
  /** Names that are no tag, remembered at most (each for ttlMs). Default 10,000. */
  maxMisses?: number;
  /** A reload found the tag's range narrowed (a `startAfter` or a lower `maxLimit` applied elsewhere): what this process buffers outside it must go. */
  onRangeNarrowed?: (bizTag: string) => void;
  clock?: Clock;
  logger?: Logger;
}

export const TAG_CACHE_DEFAULTS = defaults({ ttlMs: 1000, maxMisses: 10_000 });

/**
 * Tag settings by name, loaded from the store, with a bound: while Postgres answers, no request
 * is served from settings read more than ttlMs before (a request for a tag idle longer waits for
 * its reload, shared by every request meanwhile); a tag in steady use is reloaded in the
 * background from half the bound on, so it never waits. A pushed change (the change feed)
 * drops the tag at once. With the store down, a tag loaded before keeps its last settings (pools
 * may still be full); the outage is logged once, not per request.
 */
export class TagCache {
  private readonly cache: BoundedCache<BizTag | null>;
  private readonly outage: Episode;
  private readonly clock: Clock;
  private staleServed = 0;

  constructor(options: TagCacheOptions) {
    const o = resolveOptions({ ...TAG_CACHE_DEFAULTS, clock: systemClock, logger: silentLogger }, options, (s) => {
      checkInteger('TagCache', s, 'ttlMs', 0);
      checkInteger('TagCache', s, 'maxMisses', 0);
    });
    const log = o.logger.child({ component: 'tag-cache' });
    this.clock = o.clock;
    this.outage = new Episode(log, 'tag settings cannot be reloaded; serving known tags with their last settings', { clock: o.clock });
    this.cache = new BoundedCache<BizTag | null>({
      load: (bizTag) => o.store.getBiz(bizTag),
      boundMs: o.ttlMs,
      // Names that are no tag are remembered briefly and bounded: endless made-up names cannot grow the heap.
      capped: (tag) => tag === null,
      maxCapped: o.maxMisses,
      clock: o.clock,
      onLoaded: (bizTag, tag, previous, recovered) => {
        if (recovered || this.outage.active) this.recovered();
        if (tag && previous && narrowed(previous, tag)) o.onRangeNarrowed?.(bizTag);
      },
      onFailed: (bizTag, err, last) => {
        if (last === undefined) return;
        // Postgres down: known tags keep their last settings.
        this.staleServed++;
        this.outage.fail({ bizTag }, (err as Error).message, dependencyOf(err));
      },
    });
  }

  /**
   * The tag's settings, or null when unknown or deleted: at once when held within the bound (or
   * while the store is down), else a promise of the reload. Throws when the store fails and the
   * name was never loaded.
   */
  get(bizTag: string): Promise<BizTag | null> | BizTag | null {
    return this.cache.get(bizTag);
  }

  /** Read before a listing starts; pass to `preload`. */
  get changeCount(): number {
    return this.cache.changeVersion;
  }

  /**
   * Adds tags listed from the store that this cache does not hold yet (never over a fresher
   * answer), so a tag this process has not served yet is still known while Postgres is down.
   * `listedAt` is when the listing began (its entries are as fresh as that).
   */
  preload(tags: readonly BizTag[], listedAfter = this.changeCount, listedAt = this.clock.now()): number {
    return this.cache.seed(
      tags.map((t) => [t.bizTag, t] as [string, BizTag]),
      listedAt,
      listedAfter,
    );
  }

  /** Drops what is cached for a name, so the next lookup asks the store. */
  invalidate(bizTag: string): void {
    this.cache.invalidate(bizTag);
  }

  /** Drops every name (the change feed was lost, or came back: changes may have been missed). */
  invalidateAll(): void {
    this.cache.invalidateAll();
  }

  /** Names held (known tags and remembered misses). */
  get size(): number {
    return this.cache.size;
  }

  private recovered(): void {
    if (!this.outage.active) return;
    this.outage.recover({ staleReloads: this.staleServed });
    this.staleServed = 0;
  }
}

function narrowed(before: BizTag, after: BizTag): boolean {
  if ((after.startAfter ?? 0) > (before.startAfter ?? 0)) return true;
  return after.maxLimit !== null && (before.maxLimit === null || after.maxLimit < before.maxLimit);
}
