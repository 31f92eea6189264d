import { systemClock, type Clock } from './ports.js';

export interface BoundedCacheOptions<V> {
  /** Reads a key's value from its source (Postgres). */
  load(key: string): Promise<V>;
  /** No answer is older than this, counted from when its load began, while the source answers. */
  boundMs: number;
  /** A hit older than this starts one reload in the background (refresh-ahead). Default boundMs / 2. */
  refreshAfterMs?: number;
  /** Entries for which `capped` is true are held at most this many (the oldest goes first). Default unlimited. */
  maxCapped?: number;
  capped?: (value: V) => boolean;
  /** A load succeeded (after the source had failed, `recovered` is true). */
  onLoaded?: (key: string, value: V, previous: V | undefined, recovered: boolean) => void;
  /** A load failed; the caller gets the last value when there is one (`last`), else the error. */
  onFailed?: (key: string, err: unknown, last: V | undefined) => void;
  clock?: Clock;
}

interface Entry<V> {
  value: V;
  /** When the load that read `value` began: the value is at least this fresh. */
  at: number;
  /** The last reload failed: the source is away, and the last value applies until it answers. */
  failing: boolean;
  /** While failing: the next reload is not tried before this. */
  retryAt: number;
}

/**
 * Values by key with a stated bound: while the source answers, no caller gets a value read more
 * than `boundMs` before (an older one waits for its reload); a hit past `refreshAfterMs` reloads
 * in the background, so a key in steady use never waits. One load per key at a time, shared by
 * every caller meanwhile. While the source fails, the last value applies (callers do not wait on
 * it again; one reload at a time keeps trying). `invalidate` drops a key at once (a pushed change).
 */
export class BoundedCache<V> {
  private readonly entries = new Map<string, Entry<V>>();
  /** The load under way per key, and when it began: one younger than the bound is shared. */
  private readonly loading = new Map<string, { promise: Promise<V>; startedAt: number }>();
  /** The version at each key's last invalidation: a load begun before it is not kept. */
  private readonly invalidated = new Map<string, number>();
  private allInvalidated = 0;
  private readonly boundMs: number;
  private readonly refreshAfterMs: number;
  private readonly clock: Clock;
  private cappedCount = 0;
  /** Bumped by every invalidation: a listing begun before one must not be seeded. */
  private version = 0;

  constructor(private readonly options: BoundedCacheOptions<V>) {
    this.boundMs = options.boundMs;
    this.refreshAfterMs = options.refreshAfterMs ?? Math.floor(options.boundMs / 2);
    this.clock = options.clock ?? systemClock;
  }

  /** The value when one within the bound (or the last, while the source fails) is held; else undefined. Never waits. */
  peek(key: string): V | undefined {
    const entry = this.entries.get(key);
    return entry && this.usable(key, entry) ? entry.value : undefined;
  }

  /** The value: a held one within the bound, else a shared load. Rejects when the source fails and nothing was ever held. */
  get(key: string): V | Promise<V> {
    const entry = this.entries.get(key);
    return entry && this.usable(key, entry) ? entry.value : this.load(key);
  }

  /** Whether a held entry may answer now; starts a background reload when one is due. */
  private usable(key: string, entry: Entry<V>): boolean {
    const now = this.clock.now();
    if (entry.failing) {
      // The source is away: the last value applies, and one retry at a time keeps trying.
      if (now >= entry.retryAt) this.refresh(key);
      return true;
    }
    const age = now - entry.at;
    if (age >= this.boundMs) return false;
    if (age >= this.refreshAfterMs) this.refresh(key);
    return true;
  }

  /** Adds values read by a listing that began at `at` (with `version` read then), unless fresher ones are held or a change came since. */
  seed(values: Iterable<[string, V]>, at: number, version: number): number {
    if (version !== this.version) return 0;
    let added = 0;
    for (const [key, value] of values) {
      const held = this.entries.get(key);
      if ((held && held.at !== Number.NEGATIVE_INFINITY) || this.loading.has(key)) continue;
      if (held) this.remove(key);
      this.put(key, { value, at, failing: false, retryAt: 0 });
      added++;
    }
    return added;
  }

  /** Read before a listing starts; pass to `seed`. */
  get changeVersion(): number {
    return this.version;
  }

  /** Expires a key: the next caller reads it anew (the old value stays only for `onLoaded`'s comparison), and a load under way is not kept. */
  invalidate(key: string): void {
    this.invalidated.set(key, ++this.version);
    const entry = this.entries.get(key);
    if (entry) Object.assign(entry, { at: Number.NEGATIVE_INFINITY, failing: false });
    this.loading.delete(key);
  }

  /** Expires every key (the change feed was lost: a change may have been missed). */
  invalidateAll(): void {
    this.allInvalidated = ++this.version;
    this.invalidated.clear();
    for (const entry of this.entries.values()) Object.assign(entry, { at: Number.NEGATIVE_INFINITY, failing: false });
    this.loading.clear();
  }

  get size(): number {
    return this.entries.size;
  }

  private refresh(key: string): void {
    if (this.loading.has(key)) return;
    this.load(key).catch(() => undefined);
  }

  private load(key: string): Promise<V> {
    const now = this.clock.now();
    const pending = this.loading.get(key);
    // A load begun longer than the bound ago would answer with an older value than allowed.
    if (pending && now - pending.startedAt < this.boundMs) return pending.promise;
    const version = this.version;
    const kept = (): boolean => (this.invalidated.get(key) ?? 0) <= version && this.allInvalidated <= version;
    const promise: Promise<V> = this.options.load(key).then(
      (value) => {
        if (this.loading.get(key)?.promise === promise) this.loading.delete(key);
        // Invalidated meanwhile, or a fresher answer landed: the answer is this caller's, not the cache's.
        const previous = this.entries.get(key);
        if (!kept() || (previous && previous.at > now)) return value;
        this.remove(key);
        this.put(key, { value, at: now, failing: false, retryAt: 0 });
        this.options.onLoaded?.(key, value, previous?.value, previous?.failing === true);
        return value;
      },
      (err: unknown) => {
        if (this.loading.get(key)?.promise === promise) this.loading.delete(key);
        const entry = this.entries.get(key);
        this.options.onFailed?.(key, err, entry?.value);
        if (!entry) throw err;
        if (kept()) {
          entry.failing = true;
          entry.retryAt = this.clock.now() + Math.min(this.boundMs, 1000);
        }
        return entry.value;
      },
    );
    this.loading.set(key, { promise, startedAt: now });
    return promise;
  }

  private put(key: string, entry: Entry<V>): void {
    const capped = this.options.capped?.(entry.value) ?? true;
    this.entries.set(key, entry);
    if (!capped || this.options.maxCapped === undefined) return;
    this.cappedCount++;
    if (this.cappedCount <= this.options.maxCapped) return;
    // A Map iterates in insertion order: the first capped entry is the oldest.
    for (const [k, e] of this.entries) {
      if (this.options.capped?.(e.value) ?? true) {
        this.remove(k);
        break;
      }
    }
  }

  private remove(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    if (this.options.maxCapped !== undefined && (this.options.capped?.(entry.value) ?? true)) this.cappedCount--;
  }
}
