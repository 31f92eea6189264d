import { processLabel, type ProcessRow } from './processes.js';
import type { RefillEvent, Sample } from './store.js';

/** A pool under this share of its target is below target: the refill threshold, so a refill should be on its way. An empty pool without a target is too. */
export const LOW_RATIO = 0.2;

/** What the page knows of a tag's definition (from Postgres, as last read, or only its name from the history). */
export interface TagInfo {
  readonly bizTag: string;
  readonly mode: string;
  readonly pool: string;
  readonly shards: number;
  readonly fallback: string;
}

export type Attention = 'below-target' | 'failing-refills';

/** One tag now: its pools summed over shards as last sampled, its refills, and what needs an operator. */
export interface TagRow extends TagInfo {
  /** IDs ready, target and demand in the newest sample holding the tag's pools; null when none does. */
  readonly depth: number | null;
  readonly target: number | null;
  /** depth / target, when there is a target. */
  readonly fill: number | null;
  readonly rate: number | null;
  /** When that sample was taken. */
  readonly sampledAt: number | null;
  /** The newest refill that pushed IDs. */
  readonly lastRefillAt: number | null;
  /** Shards whose refills failed since their last success: how many, failures in all, since when, the last error. */
  readonly failing: { shards: number; failures: number; since: number; why: string } | null;
  readonly attention: Attention[];
}

/** One server this process (or a live process's report) cannot reach, or whose data could not be read. */
export interface DownServer {
  /** `postgres`, `redis`, `zookeeper`, `kafka`, or a check's own name. */
  readonly id: string;
  readonly name: string;
  readonly message: string;
  /** The processes that say so (empty when a read by this page failed). */
  readonly by: string[];
}

export interface Summary {
  readonly tags: number;
  readonly belowTarget: string[];
  readonly failingRefills: string[];
  readonly silentProcesses: string[];
  readonly serversDown: string[];
}

/** The servers behind readiness checks; other checks (snowflake, refill, deployment...) are not servers. */
const SERVERS: Record<string, { id: string; name: string }> = {
  database: { id: 'postgres', name: 'Postgres' },
  postgres: { id: 'postgres', name: 'Postgres' },
  redis: { id: 'redis', name: 'Redis' },
  zookeeper: { id: 'zookeeper', name: 'ZooKeeper' },
  fence: { id: 'zookeeper', name: 'ZooKeeper' },
  kafka: { id: 'kafka', name: 'Kafka' },
};

/** The server a readiness check names, or undefined for a check that is not about a server. */
export function serverOfCheck(check: string): { id: string; name: string } | undefined {
  return SERVERS[check];
}

/** Each tag with its pools as last sampled and its refills; `samples` and `refills` oldest first. */
export function tagRows(tags: readonly TagInfo[], samples: readonly Sample[], refills: readonly RefillEvent[]): TagRow[] {
  const pools = newestPools(tags, samples);
  const byTag = new Map<string, RefillEvent[]>();
  for (const e of refills) {
    const list = byTag.get(e.bizTag);
    if (list) list.push(e);
    else byTag.set(e.bizTag, [e]);
  }
  return tags.map((tag) => {
    const sampled = pools.get(tag.bizTag);
    const depth = sampled ? sampled.depth : null;
    const target = sampled ? sampled.target : null;
    const fill = depth !== null && target !== null && target > 0 ? depth / target : null;
    const events = byTag.get(tag.bizTag) ?? [];
    const lastRefillAt = events.reduce<number | null>((at, e) => (e.status === 'pushed' && (at === null || e.at > at) ? e.at : at), null);
    const failing = failingOf(events);
    const attention: Attention[] = [];
    // An empty pool with no target (Redis lost its data, or no refill ever landed) serves nothing either.
    if ((fill !== null && fill < LOW_RATIO) || (depth === 0 && target === null)) attention.push('below-target');
    if (failing) attention.push('failing-refills');
    return { ...tag, depth, target, fill, rate: sampled ? sampled.rate : null, sampledAt: sampled ? sampled.at : null, lastRefillAt, failing, attention };
  });
}

/** Per tag, its pools (summed over shards) in the newest sample that holds any of them. */
function newestPools(tags: readonly TagInfo[], samples: readonly Sample[]): Map<string, { depth: number; target: number | null; rate: number; at: number }> {
  const wanted = new Set(tags.map((t) => t.bizTag));
  const found = new Map<string, { depth: number; target: number | null; rate: number; at: number }>();
  for (let i = samples.length - 1; i >= 0 && found.size < wanted.size; i--) {
    const sample = samples[i]!;
    const here = new Map<string, { depth: number; target: number | null; rate: number; at: number }>();
    for (const p of sample.pools) {
      if (!wanted.has(p.bizTag) || found.has(p.bizTag)) continue;
      const sum = here.get(p.bizTag) ?? { depth: 0, target: null, rate: 0, at: sample.at };
      here.set(p.bizTag, {
        depth: sum.depth + p.depth,
        target: p.target === null ? sum.target : (sum.target ?? 0) + p.target,
        rate: sum.rate + p.rate,
        at: sample.at,
      });
    }
    for (const [tag, sum] of here) found.set(tag, sum);
  }
  return found;
}

/** Shards whose refills failed since the shard's last pushed refill (skips say nothing either way). */
function failingOf(events: readonly RefillEvent[]): TagRow['failing'] {
  const perShard = new Map<number, RefillEvent[]>();
  for (const e of events) {
    if (e.status === 'skipped') continue;
    // A success ends the run of failures before it.
    let run = perShard.get(e.shard);
    if (!run) perShard.set(e.shard, (run = []));
    if (e.status === 'pushed') run.length = 0;
    else run.push(e);
  }
  const runs = [...perShard.values()].filter((run) => run.length > 0);
  if (runs.length === 0) return null;
  const all = runs.flat().sort((a, b) => a.at - b.at);
  return { shards: runs.length, failures: all.length, since: all[0]!.at, why: all[all.length - 1]!.why ?? '' };
}

/**
 * The servers down: those whose data this page could not read (`reads`), then those a failing
 * check names in a fresh report (a silent, stopped or unheard process's checks are old news).
 */
export function serversDown(processes: readonly ProcessRow[], reads: ReadonlyArray<{ id: string; name: string; message: string }>): DownServer[] {
  const down = new Map<string, DownServer>();
  for (const r of reads) if (!down.has(r.id)) down.set(r.id, { ...r, by: [] });
  for (const p of processes) {
    if (p.state === 'silent' || p.state === 'stopped' || p.state === 'unheard') continue;
    for (const [check, result] of Object.entries(p.checks)) {
      const server = serverOfCheck(check);
      if (result.ok || !server) continue;
      const known = down.get(server.id);
      if (known) known.by.push(processLabel(p));
      else down.set(server.id, { ...server, message: result.message ?? `${check} check failing`, by: [processLabel(p)] });
    }
  }
  return [...down.values()];
}

/** What needs an operator first: tags below target, failing refills, silent processes, servers down. */
export function summarize(rows: readonly TagRow[], processes: readonly ProcessRow[], down: readonly DownServer[]): Summary {
  return {
    tags: rows.length,
    belowTarget: rows.filter((r) => r.attention.includes('below-target')).map((r) => r.bizTag),
    failingRefills: rows.filter((r) => r.attention.includes('failing-refills')).map((r) => r.bizTag),
    silentProcesses: processes.filter((p) => p.state === 'silent').map(processLabel),
    serversDown: down.map((d) => d.name),
  };
}
