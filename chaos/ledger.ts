/**
 * Every ID the chaos run was handed, per tag, as ranges (a single ID is the range [id, id]),
 * with counts per path and source, a per-second timeline per path, latencies and errors per
 * phase. `duplicates()` sorts each tag's ranges and reports every overlap.
 */

class Ranges {
  starts: BigInt64Array = new BigInt64Array(1 << 16);
  ends: BigInt64Array = new BigInt64Array(1 << 16);
  /** Who handed each range out (an index into Ledger.origins): a duplicate names both. */
  origins: Uint16Array = new Uint16Array(1 << 16);
  length = 0;

  push(start: bigint, end: bigint, origin: number): void {
    // The same origin continuing its last range (an SDK handing out a block one ID at a time, a
    // list of consecutive IDs): extend it. The set of IDs is the same, so is every overlap.
    const last = this.length - 1;
    if (last >= 0 && this.origins[last] === origin && start === this.ends[last]! + 1n && end >= start) {
      this.ends[last] = end;
      return;
    }
    if (this.length === this.starts.length) {
      const grow = (a: BigInt64Array): BigInt64Array => {
        const b = new BigInt64Array(a.length * 2);
        b.set(a);
        return b;
      };
      this.starts = grow(this.starts);
      this.ends = grow(this.ends);
      const origins = new Uint16Array(this.origins.length * 2);
      origins.set(this.origins);
      this.origins = origins;
    }
    this.origins[this.length] = origin;
    this.starts[this.length] = start;
    this.ends[this.length] = end;
    this.length++;
  }

  /**
   * Overlapping ranges, at most `limit` of them. A sweep over the starts and the ends sorted
   * apart (native typed-array sorts: no JS array of a hundred million indices, which V8 cannot
   * hold): an ID covered by two ranges is where more than one range is open. Closed ranges, so at
   * one value a start is taken before an end. Each place found is then matched back to the
   * ranges that cover it, in one pass, to name their origins.
   */
  overlaps(limit: number, originName: (i: number) => string): string[] {
    const n = this.length;
    const starts = this.starts.slice(0, n).sort();
    const ends = this.ends.slice(0, n).sort();
    const places: bigint[] = [];
    let open = 0;
    for (let i = 0, j = 0; i < n && places.length < limit;) {
      if (starts[i]! <= ends[j]!) {
        open++;
        if (open === 2) places.push(starts[i]!);
        i++;
      } else {
        open--;
        j++;
      }
    }
    if (places.length === 0) return [];
    // Who covers each place: one pass over the ranges, a binary search among the places each.
    const covering = places.map(() => [] as number[]);
    for (let k = 0; k < n; k++) {
      const from = this.starts[k]!;
      const to = this.ends[k]!;
      let lo = 0;
      let hi = places.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (places[mid]! < from) lo = mid + 1;
        else hi = mid;
      }
      for (let p = lo; p < places.length && places[p]! <= to; p++) covering[p]!.push(k);
    }
    return places.map((place, p) => {
      const who = covering[p]!.slice(0, 4).map((k) => `[${this.starts[k]}, ${this.ends[k]}] from ${originName(this.origins[k]!)}`);
      return `ID ${place} is in ${covering[p]!.length} ranges: ${who.join(' and ')}`;
    });
  }
}

export interface PhaseStats {
  latencies: Map<string, number[]>;
  ids: Map<string, number>;
  errors: Map<string, number>;
  startedAt: number;
}

/** How long after a fault recovered answers count as outside its window again. */
export const CALM_AFTER_MS = 5000;

export class Ledger {
  readonly startedAt = Date.now();
  private readonly tags = new Map<string, Ranges>();
  /** `path source` → IDs. */
  readonly bySource = new Map<string, number>();
  /** path → IDs per second since the start. */
  readonly timeline = new Map<string, number[]>();
  /** `path code` → count. */
  readonly errors = new Map<string, number>();
  readonly phases: PhaseStats[] = [];
  /**
   * path → latencies of answers outside fault windows: recorded while no fault runs and at least
   * CALM_AFTER_MS after the last one recovered (an answer that waited out a fault ends after it).
   */
  readonly calm = new Map<string, number[]>();
  private faultRunning = false;
  private calmFrom = 0;
  private readonly origins: string[] = [];
  private readonly originIndex = new Map<string, number>();
  total = 0;

  constructor() {
    this.newPhase();
  }

  /** A fault is being injected: answers from now on are inside its window. */
  faultStarted(): void {
    this.faultRunning = true;
  }

  /** The fault recovered: answers count as outside fault windows again CALM_AFTER_MS from now. */
  faultEnded(now = Date.now()): void {
    this.faultRunning = false;
    this.calmFrom = now + CALM_AFTER_MS;
  }

  newPhase(): void {
    this.phases.push({ latencies: new Map(), ids: new Map(), errors: new Map(), startedAt: Date.now() });
  }

  private get phase(): PhaseStats {
    return this.phases[this.phases.length - 1]!;
  }

  private add(map: Map<string, number>, key: string, n: number): void {
    map.set(key, (map.get(key) ?? 0) + n);
  }

  /** One answer: ranges handed out on `path` for `bizTag` from `source`, and how long it took. */
  record(path: string, bizTag: string, source: string, ranges: Array<[bigint, bigint]>, latencyMs: number, server = ''): void {
    let tag = this.tags.get(bizTag);
    if (!tag) this.tags.set(bizTag, (tag = new Ranges()));
    const key = `${path} ${source}${server ? ` via ${server}` : ''} (phase ${this.phases.length - 1})`;
    let origin = this.originIndex.get(key);
    if (origin === undefined) {
      origin = this.origins.push(key) - 1;
      this.originIndex.set(key, origin);
    }
    let n = 0;
    for (const [start, end] of ranges) {
      tag.push(start, end, origin);
      n += Number(end - start + 1n);
    }
    this.total += n;
    this.add(this.bySource, `${path}\t${source}`, n);
    this.add(this.phase.ids, path, n);
    const second = Math.floor((Date.now() - this.startedAt) / 1000);
    let line = this.timeline.get(path);
    if (!line) this.timeline.set(path, (line = []));
    while (line.length <= second) line.push(0);
    line[second]! += n;
    let samples = this.phase.latencies.get(path);
    if (!samples) this.phase.latencies.set(path, (samples = []));
    samples.push(latencyMs);
    if (!this.faultRunning && Date.now() >= this.calmFrom) {
      let calm = this.calm.get(path);
      if (!calm) this.calm.set(path, (calm = []));
      calm.push(latencyMs);
    }
  }

  error(path: string, code: string): void {
    this.add(this.errors, `${path}\t${code}`, 1);
    this.add(this.phase.errors, `${path}\t${code}`, 1);
  }

  /** Every overlap across all tags (empty: no ID was handed out twice). */
  duplicates(limit = 100): string[] {
    const out: string[] = [];
    for (const [tag, ranges] of this.tags) for (const o of ranges.overlaps(limit - out.length, (i) => this.origins[i] ?? '?')) out.push(`${tag}: ${o}`);
    return out;
  }
}
