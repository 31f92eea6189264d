import type { KnownValue } from '../core/last-known.js';
import type { BizTag } from '../core/ports.js';
import { serversDown, summarize, tagRows, type DownServer, type Summary, type TagInfo, type TagRow } from './attention.js';
import type { HistoryRead } from './mirror.js';
import { processRows, type LiveProcess, type ProcessRow } from './processes.js';
import type { ProcessReport, RefillEvent, Sample } from './store.js';

/** What `/dashboard/data.json` answers: always 200 while this server runs, with what is still known. */
export interface DashboardData {
  readonly now: number;
  /** Where the history lives: `redis` (shared, mirrored here) or `memory` (this process only). */
  readonly store: 'redis' | 'memory';
  /** The process serving the page. */
  readonly self: string;
  /** Every tag, attention first in the summary; the page filters and sorts them. */
  readonly tags: TagRow[];
  /** Where the tag list comes from: Postgres now, as last read from it (`memory`, with when), or only the names in the history. */
  readonly tagsFrom: { source: 'postgres' | 'memory' | 'history'; at?: number };
  readonly processes: ProcessRow[];
  /** The servers down, named: the page shows them in red. */
  readonly down: DownServer[];
  readonly summary: Summary;
  /** The history after `since`: samples and refill events, oldest first. */
  readonly samples: Sample[];
  readonly refills: RefillEvent[];
  /** Why the shared history (Redis) cannot be read; the history above is this server's memory. */
  readonly storeError?: string;
  /** Why the tags cannot be read from Postgres. */
  readonly tagsError?: string;
}

export interface DashboardViewInput {
  now: number;
  sampleMs: number;
  storeKind: 'redis' | 'memory';
  /** This process, as it is now. */
  self: ProcessReport;
  /** The tag list now, or as last read. */
  tags: KnownValue<readonly BizTag[]>;
  /** The history after the page's `since`, and the reports. */
  history: HistoryRead;
  /** Everything held over the whole window (for the tags' state and the summary). */
  held: { samples: readonly Sample[]; refills: readonly RefillEvent[] };
  /** The processes Postgres saw lately (asked only while the history cannot be read). */
  live?: readonly LiveProcess[] | undefined;
}

/** The page's data from what could be read: nothing missing is fatal, each gap is named. */
export function dashboardView(input: DashboardViewInput): DashboardData {
  const { now, history, tags } = input;
  const storeError = input.storeKind === 'redis' ? history.error : undefined;
  const infos = tags.value ? tags.value.map(tagInfo) : tagsInHistory(input.held);
  const processes = processRows({
    reports: history.reports,
    self: input.self,
    now,
    sampleMs: input.sampleMs,
    heard: storeError === undefined,
    live: input.live,
  });
  const reads: Array<{ id: string; name: string; message: string }> = [];
  if (tags.error !== undefined) {
    const shown = tags.value && tags.at !== undefined ? `the tags as read ${Math.round((now - tags.at) / 1000)} s ago` : 'only the tags named in the history';
    reads.push({ id: 'postgres', name: 'Postgres', message: `the tags cannot be read (${tags.error}); showing ${shown}` });
  }
  if (storeError !== undefined)
    reads.push({ id: 'redis', name: 'Redis', message: `the shared history cannot be read (${storeError}); showing this server's copy of it` });
  const rows = tagRows(infos, input.held.samples, input.held.refills);
  const down = serversDown(processes, reads);
  const tagsFrom: DashboardData['tagsFrom'] =
    tags.error === undefined
      ? { source: 'postgres' }
      : tags.value
        ? { source: 'memory', ...(tags.at !== undefined ? { at: tags.at } : {}) }
        : { source: 'history' };
  return {
    now,
    store: input.storeKind,
    self: input.self.id,
    tags: rows,
    tagsFrom,
    processes,
    down,
    summary: summarize(rows, processes, down),
    samples: history.samples,
    refills: history.refills,
    ...(storeError !== undefined ? { storeError } : {}),
    ...(tags.error !== undefined ? { tagsError: tags.error } : {}),
  };
}

function tagInfo(t: BizTag): TagInfo {
  return { bizTag: t.bizTag, mode: t.mode, pool: t.pool, shards: t.shards, fallback: t.fallback };
}

/** With no tag list at all (Postgres down since this process started): the tags the history names. */
function tagsInHistory(held: DashboardViewInput['held']): TagInfo[] {
  const names = new Set<string>();
  for (const s of held.samples) for (const p of s.pools) names.add(p.bizTag);
  for (const e of held.refills) names.add(e.bizTag);
  return [...names].sort().map((bizTag) => ({ bizTag, mode: 'unknown', pool: 'unknown', shards: 1, fallback: 'unknown' }));
}
