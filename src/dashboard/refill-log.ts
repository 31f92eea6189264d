import { silentLogger, type Logger } from '../core/logger.js';
import type { RefillJobData, RefillJobLike, RefillOutcome, RefillProcessor } from '../refill/processor.js';
import type { DashboardStore, RefillEvent } from './store.js';

/**
 * The refill processor, with each refill job's result written to the dashboard's timeline (tag,
 * reason, segments and IDs, how long it ran, or why it was skipped or failed). The timeline is
 * best effort: a result that cannot be written (Redis down) is dropped, the refill is not.
 */
export function recordingRefills(processor: RefillProcessor, store: DashboardStore, by: string, logger: Logger = silentLogger): RefillProcessor {
  const log = logger.child({ component: 'dashboard' });
  const record = (event: RefillEvent): void => {
    store.addRefill(event).catch((err: unknown) => log.debug({ err: (err as Error).message }, 'refill not written to the dashboard timeline'));
  };
  const process: RefillProcessor['process'] = async (job: RefillJobLike) => {
    if (job.name !== 'refill') return processor.process(job);
    const data = job.data as Partial<RefillJobData>;
    const started = Date.now();
    const base = { bizTag: String(data.bizTag ?? '?'), shard: Number(data.shard ?? 0), reason: String(data.reason ?? '?'), by };
    try {
      const outcome = await processor.process(job);
      if ('status' in outcome) record(eventOf(outcome as RefillOutcome, base, started));
      return outcome;
    } catch (err) {
      record({ ...base, at: Date.now(), ms: Date.now() - started, status: 'failed', segments: 0, ids: 0, why: (err as Error).message });
      throw err;
    }
  };
  return Object.freeze({ ...processor, process });
}

function eventOf(outcome: RefillOutcome, base: Pick<RefillEvent, 'bizTag' | 'shard' | 'reason' | 'by'>, started: number): RefillEvent {
  const at = Date.now();
  if (outcome.status === 'skipped') return { ...base, at, ms: at - started, status: 'skipped', segments: 0, ids: 0, why: outcome.why };
  return {
    ...base,
    at,
    ms: at - started,
    status: 'pushed',
    segments: outcome.segments.length,
    ids: outcome.segments.reduce((n, s) => n + (s.end - s.start + 1), 0),
    target: outcome.target,
    depthBefore: outcome.depthBefore,
  };
}
