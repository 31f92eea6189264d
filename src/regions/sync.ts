/**
 * `idmint biz sync --from URL`: this region's tags made the same as another region's, over the
 * admin API of both. A tag must have the same mode, format and shards in every region (its IDs
 * decode alike); `maxLimit`, `step`, `fallback`, `pool` and `description` follow the source. A tag
 * region 0 had before it became a region starts here above its floor.
 */
import { IdmintError } from '../core/errors.js';
import { hasCounter } from '../core/ports.js';
import type { RegionsReport } from './report.js';

export interface TagDef {
  bizTag: string;
  mode: string;
  step: number;
  maxLimit: number | null;
  shards: number;
  fallback: string;
  pool: string;
  format: string;
  description: string;
}

export type SyncStep =
  | { bizTag: string; action: 'create'; body: Record<string, unknown> }
  | { bizTag: string; action: 'update'; patch: Record<string, unknown>; changes: string[] }
  | { bizTag: string; action: 'unchanged' }
  | { bizTag: string; action: 'conflict'; reason: string };

const FOLLOWED = ['step', 'maxLimit', 'fallback', 'pool', 'description'] as const;

/** Both sides must be regions of one layout, and not the same region. Throws saying why not. */
export function checkRegionPair(from: RegionsReport, here: RegionsReport, urls: { from: string; here: string }): void {
  for (const [side, report, url] of [
    ['--from', from, urls.from],
    ['this server', here, urls.here],
  ] as const) {
    if (report.regions === 1)
      throw new IdmintError(
        'BAD_REQUEST',
        `${side} (${url}) is a single region (no IDMINT_REGIONS recorded): biz sync copies tags between regions of one split`,
      );
  }
  if (from.regions !== here.regions || from.stripe !== here.stripe) {
    throw new IdmintError(
      'BAD_REQUEST',
      `the two are regions of different splits (${from.regions} regions, stripe ${from.stripe} at ${urls.from}; ${here.regions}, stripe ${here.stripe} at ${urls.here})`,
    );
  }
  if (from.region === here.region) {
    throw new IdmintError(
      'BAD_REQUEST',
      `${urls.from} and ${urls.here} are both region ${here.region}: two deployments given the same IDMINT_REGION hand out the same IDs. Give one of them another number (on a fresh database: the number is recorded at its first start)`,
    );
  }
}

/**
 * Whether an obfuscated tag may exist in every one of these regions: only when each has recorded
 * the same key fingerprint. Two keys permute the regions' disjoint raw IDs into overlapping
 * images, and a region with no recorded key cannot show it has the same one. Throws saying why.
 */
export function checkKeyAcrossRegions(format: string, reports: ReadonlyArray<{ url: string; report: RegionsReport }>): void {
  if (!format.startsWith('obfuscated')) return;
  const missing = reports.filter((r) => r.report.obfuscationKeyFingerprint === undefined);
  if (missing.length > 0) {
    throw new IdmintError(
      'BAD_REQUEST',
      `${missing.map((r) => r.url).join(', ')} recorded no IDMINT_OBFUSCATION_KEY: an obfuscated tag needs the same key in every region (start a process there with the deployment's key first)`,
    );
  }
  const prints = new Set(reports.map((r) => r.report.obfuscationKeyFingerprint));
  if (prints.size > 1) {
    throw new IdmintError(
      'BAD_REQUEST',
      `the regions have different IDMINT_OBFUSCATION_KEYs (${reports.map((r) => `${r.url}: ${r.report.obfuscationKeyFingerprint!.slice(0, 8)}…`).join(', ')}): an obfuscated tag would repeat IDs across them; give every region the same key`,
    );
  }
}

/** What to do for each tag of the source. Tags only here are left alone. */
export function planSync(source: readonly TagDef[], here: readonly TagDef[], from: RegionsReport, hereReport: RegionsReport): SyncStep[] {
  const mine = new Map(here.map((t) => [t.bizTag, t]));
  // Unrecorded on either side counts as different: the same key cannot be shown.
  const keysDiffer =
    from.obfuscationKeyFingerprint === undefined ||
    hereReport.obfuscationKeyFingerprint === undefined ||
    from.obfuscationKeyFingerprint !== hereReport.obfuscationKeyFingerprint;
  return source.map((tag): SyncStep => {
    const floor = hasCounter(tag.mode) ? Number(from.floors[tag.bizTag] ?? 0) : 0;
    const startAfter = floor > 0 ? { startAfter: floor } : {};
    if (keysDiffer && tag.format.startsWith('obfuscated')) {
      return {
        bizTag: tag.bizTag,
        action: 'conflict',
        reason:
          'the two regions have different IDMINT_OBFUSCATION_KEYs (their recorded fingerprints differ, or one recorded none): an obfuscated tag would repeat IDs',
      };
    }
    const ours = mine.get(tag.bizTag);
    if (!ours) {
      const { bizTag, mode, step, maxLimit, shards, fallback, pool, format, description } = tag;
      return { bizTag, action: 'create', body: { bizTag, mode, step, maxLimit, shards, fallback, pool, format, description, ...startAfter } };
    }
    const fixed = (['mode', 'format', 'shards'] as const).filter((k) => ours[k] !== tag[k]);
    if (fixed.length > 0)
      return {
        bizTag: tag.bizTag,
        action: 'conflict',
        reason: `its ${fixed.map((k) => `${k} is ${String(ours[k])} here, ${String(tag[k])} there`).join('; ')} (fixed at creation)`,
      };
    const differ = FOLLOWED.filter((k) => ours[k] !== tag[k]);
    if (differ.includes('maxLimit') && tag.format.startsWith('obfuscated')) {
      return {
        bizTag: tag.bizTag,
        action: 'conflict',
        reason: `its maxLimit is ${String(ours.maxLimit)} here, ${String(tag.maxLimit)} there, and an obfuscated tag's limit is fixed`,
      };
    }
    if (differ.length === 0 && floor === 0) return { bizTag: tag.bizTag, action: 'unchanged' };
    const patch = Object.fromEntries(differ.map((k) => [k, tag[k]]));
    return {
      bizTag: tag.bizTag,
      action: 'update',
      patch: { ...patch, ...startAfter },
      changes: differ.map((k) => `${k} ${JSON.stringify(ours[k])} -> ${JSON.stringify(tag[k])}`),
    };
  });
}
