import { Episode } from '../core/episode.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { systemClock, type BizStore, type BizTag, type Clock } from '../core/ports.js';
import { defaults } from '../core/options.js';

export interface TagCacheOptions {
  store: Pick<BizStore, 'getBiz'>;
  /** How long a tag's settings (or its absence) are trusted; changes reach every process within this. Default 1000 ms. */
  ttlMs?: number;
  /** Names that are no tag, remembered at most (each for ttlMs). Default 10,000. */
  maxMisses?: number;
  clock?: Clock;
  logger?: Logger;
}

export const TAG_CACHE_DEFAULTS = defaults({ ttlMs: 1000, maxMisses: 10_000 });

interface Cached {
  tag: BizTag;
  loadedAt: number;
}

/**
 * Tag settings by name, loaded from the store and trusted for ttlMs. Concurrent lookups of one
 * name share one query. With the store down, a tag loaded before keeps its last settings (pools
 * may still be full); the outage is logged once, not per request.
 */
export class TagCache {
  private readonly tags = new Map<string, Cached>();
  // Names that are no tag, remembered briefly so a burst of them costs one lookup each — and
  // bounded, so requests for endless made-up names cannot grow the heap.
  private readonly misses = new Map<string, number>();
  private readonly loading = new Map<string, Promise<BizTag | null>>();
  private readonly store: Pick<BizStore, 'getBiz'>;
  private readonly ttlMs: number;
  private readonly maxMisses: number;
  private readonly clock: Clock;
  private readonly outage: Episode;
  private staleServed = 0;
  /** Changes made in this process (invalidate), so a listing that started before one is not cached. */
  private changes = 0;

  /** Pass to `preload` with a listing that starts now. */
  get changeCount(): number {
    return this.changes;
  }

  constructor(options: TagCacheOptions) {
    this.store = options.store;
    this.ttlMs = options.ttlMs ?? TAG_CACHE_DEFAULTS.ttlMs;
    this.maxMisses = options.maxMisses ?? TAG_CACHE_DEFAULTS.maxMisses;
    this.clock = options.clock ?? systemClock;
    const log = (options.logger ?? silentLogger).child({ component: 'tag-cache' });
    this.outage = new Episode(log, 'tag settings cannot be reloaded; serving known tags with their last settings', { clock: this.clock });
  }

  /**
   * The tag's settings, or null when unknown or deleted. A known answer older than ttlMs is still
   * returned while one reload runs in the background (refresh-ahead): requests never wait on
   * Postgres for a tag they have seen, so a reload costs no request a round trip. Only a name seen
   * for the first time waits, and concurrent first lookups share one query. Throws when the store
   * fails and the name was never loaded.
   */
  get(bizTag: string): Promise<BizTag | null> | BizTag | null {
    const now = this.clock.now();
    const cached = this.tags.get(bizTag);
    if (cached) {
      if (now - cached.loadedAt >= this.ttlMs) this.refresh(bizTag);
      return cached.tag;
    }
    const missedAt = this.misses.get(bizTag);
    if (missedAt !== undefined) {
      if (now - missedAt >= this.ttlMs) this.refresh(bizTag);
      return null;
    }
    return this.load(bizTag);
  }

  /** One reload at a time per name, in the background; its failure is the outage episode's, not a request's. */
  private refresh(bizTag: string): void {
    if (this.loading.has(bizTag)) return;
    this.load(bizTag).catch(() => undefined);
  }

  private load(bizTag: string): Promise<BizTag | null> {
    let pending = this.loading.get(bizTag);
    if (pending) return pending;
    const current = (): boolean => this.loading.get(bizTag) === pending;
    pending = this.store.getBiz(bizTag).then(
      (tag) => {
        // Invalidated meanwhile (a change made here): the answer is the caller's, not the cache's.
        if (!current()) return tag;
        this.loading.delete(bizTag);
        this.recovered();
        if (tag) {
          this.misses.delete(bizTag);
          this.tags.set(bizTag, { tag, loadedAt: this.clock.now() });
        } else {
          this.tags.delete(bizTag);
          this.rememberMiss(bizTag);
        }
        return tag;
      },
      (err: unknown) => {
        if (current()) this.loading.delete(bizTag);
        const cached = this.tags.get(bizTag);
        if (!cached) throw err;
        // Postgres down: known tags keep their last settings (pools may still be full).
        this.staleServed++;
        this.outage.fail({ bizTag }, (err as Error).message);
        return cached.tag;
      },
    );
    this.loading.set(bizTag, pending);
    return pending;
  }

  private recovered(): void {
    if (!this.outage.active) return;
    this.outage.recover({ staleReloads: this.staleServed });
    this.staleServed = 0;
  }

  /**
   * Adds tags listed from the store that this cache does not hold yet (never over a fresher
   * answer), so a tag this process has not served yet is still known while Postgres is down.
   */
  preload(tags: readonly BizTag[], listedAfter = this.changes): number {
    // A change made here after the listing began: it may predate the change; the next one will not.
    if (listedAfter !== this.changes) return 0;
    const now = this.clock.now();
    let added = 0;
    for (const tag of tags) {
      if (this.tags.has(tag.bizTag) || this.loading.has(tag.bizTag)) continue;
      this.misses.delete(tag.bizTag);
      this.tags.set(tag.bizTag, { tag, loadedAt: now });
      added++;
    }
    return added;
  }

  /** Drops what is cached for a name, so the next lookup asks the store. */
  invalidate(bizTag: string): void {
    this.changes++;
    this.tags.delete(bizTag);
    this.misses.delete(bizTag);
    this.loading.delete(bizTag);
  }

  /** Names held (known tags and remembered misses). */
  get size(): number {
    return this.tags.size + this.misses.size;
  }

  private rememberMiss(bizTag: string): void {
    this.misses.delete(bizTag);
    this.misses.set(bizTag, this.clock.now());
    // A Map iterates in insertion order: the first key is the oldest miss.
    if (this.misses.size > this.maxMisses) this.misses.delete(this.misses.keys().next().value as string);
  }
}
