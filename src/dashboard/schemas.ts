import { z } from 'zod';
import type { ProcessReport, RefillEvent, Sample } from './entries.js';

/**
 * What the dashboard accepts from its shared store (Redis): any process, or anyone who can write
 * to Redis, puts entries there, and the page draws them for an admin whose browser holds the
 * admin token. An entry is checked when read: numbers are finite numbers, a status one of the
 * known words, every text bounded; one that is not is skipped. The page escapes every text as
 * well (invariant 10: data read back for display is escaped).
 */
const text = (max: number) => z.string().max(max);
const amount = z.number().finite();
const count = z.number().int().min(0);

const issuedCounts = z.object({ pool: amount, segment: amount, snowflake: amount });

const poolPoint = z.object({
  bizTag: text(128),
  shard: count,
  kind: text(64),
  depth: amount,
  target: amount.nullable(),
  rate: amount,
  kafka: z.object({ topic: text(300), group: text(300), lagBlocks: z.array(amount).max(10_000), blockIds: amount }).optional(),
});

const processReport = z.object({
  id: text(300),
  address: text(300).optional(),
  host: text(255),
  pid: count,
  roles: z.array(text(64)).max(16),
  version: text(64),
  startedAt: amount,
  at: amount,
  status: z.enum(['ready', 'degraded', 'not_ready']),
  checks: z.record(text(64), z.object({ ok: z.boolean(), message: text(2000).optional(), hint: text(2000).optional() })),
  issued: z.record(text(128), issuedCounts),
  kafka: z.array(poolPoint).max(10_000).optional(),
  stoppedAt: amount.optional(),
});

const sample = z.object({ at: amount, pools: z.array(poolPoint).max(100_000), issued: z.record(text(128), issuedCounts) });

const refillEvent = z.object({
  at: amount,
  bizTag: text(128),
  shard: count,
  reason: text(64),
  status: z.enum(['pushed', 'skipped', 'failed']),
  ms: amount,
  segments: count,
  ids: amount,
  target: amount.optional(),
  depthBefore: amount.optional(),
  why: text(2000).optional(),
  by: text(300),
});

/** Each kind of stored entry, by what it is. */
export const DASHBOARD_SCHEMAS = {
  report: processReport as z.ZodType<ProcessReport>,
  sample: sample as z.ZodType<Sample>,
  refill: refillEvent as z.ZodType<RefillEvent>,
};

/** A stored entry as its kind, or nothing when it is not valid JSON of that shape. */
export function readEntry<T>(schema: z.ZodType<T>, text: string | undefined): T[] {
  if (text === undefined) return [];
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return [];
  }
  const parsed = schema.safeParse(value);
  return parsed.success ? [parsed.data] : [];
}
