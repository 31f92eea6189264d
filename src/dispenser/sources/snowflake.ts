import { BadRequestError, ConfigError, IdmintError } from '../../core/errors.js';
import { LEAF_LAYOUT, type DecodedId, type Layout } from '../../core/layout.js';
import { assertLayoutUsable, SnowflakeGenerator } from '../../core/snowflake.js';
import { systemClock, type BizTag, type Clock, type IdSource, type WorkerIdLease, type WorkerIdProvider } from '../../core/ports.js';
import { annotate } from '../../tracing/tracer.js';
import { ATTR } from '../../tracing/dispense.js';
import { silentLogger, type Logger } from '../../core/logger.js';
import { resolveOptions } from '../../core/options.js';

export interface SnowflakeSourceOptions {
  /** Where the worker id comes from (see src/worker-id). */
  provider: WorkerIdProvider;
  /** Default LEAF_LAYOUT. */
  layout?: Layout;
  clock?: Clock;
  logger?: Logger;
  /** For layouts with datacenter bits. Default 0. */
  datacenterId?: number;
  /** Largest clock step back the generator waits out. Default 5 ms (invariant 6). */
  maxBackwardsMs?: number;
}

/**
 * Snowflake IDs as an IdSource: a generator plus the worker-id lease whose guard vetoes any ID
 * stamped past the persisted clock mark. Synchronous underneath, so the fallback costs no hop.
 */
export class SnowflakeSource implements IdSource {
  readonly name = 'snowflake' as const;
  readonly generator: SnowflakeGenerator;
  readonly lease: WorkerIdLease;
  private readonly guard: ((timestampMs: number) => void) | null;
  private readonly lastMsOfTick: number;
  private closing: Promise<void> | null = null;

  constructor(generator: SnowflakeGenerator, lease: WorkerIdLease) {
    if (generator.workerId !== lease.workerId)
      throw new ConfigError(
        `generator worker id ${generator.workerId} differs from the lease's ${lease.workerId}; build the generator with the lease's id`,
        'workerId',
      );
    this.generator = generator;
    this.lease = lease;
    this.guard = (ms) => lease.assertIssuable(ms);
    // An ID stamped with a tick may have been issued up to its last millisecond.
    this.lastMsOfTick = generator.layout.unitMs - 1;
  }

  get workerId(): number {
    return this.generator.workerId;
  }

  get layout(): Layout {
    return this.generator.layout;
  }

  /** One ID (Leaf's `/api/snowflake/get/:key`). Throws CLOCK_BACKWARDS / NOT_READY rather than risk a repeat. */
  nextId(): bigint {
    this.assertOpen();
    const id = this.generator.nextId();
    this.check(id);
    return id;
  }

  /** `count` IDs, increasing; all or nothing. */
  nextIds(count: number): bigint[] {
    this.assertOpen();
    if (!Number.isSafeInteger(count) || count < 1) throw new BadRequestError(`count must be a positive integer, got ${count}`, 'count');
    const ids = this.generator.nextIds(count);
    // IDs increase within a run, so the last one carries the latest timestamp.
    this.check(ids[ids.length - 1]!);
    return ids;
  }

  async take(_tag: BizTag, count: number): Promise<string[]> {
    annotate(ATTR.workerId, this.generator.workerId);
    return this.nextIds(count).map(String);
  }

  decode(id: bigint): DecodedId {
    return this.generator.layout.decode(id);
  }

  /** Idempotent: releases the lease (stops ZooKeeper reports). */
  close(): Promise<void> {
    this.closing ??= this.lease.close();
    return this.closing;
  }

  private check(id: bigint): void {
    if (this.guard === null) return;
    const layout = this.generator.layout;
    this.guard(layout.epochMs + Number(id >> BigInt(layout.timeShift)) * layout.unitMs + this.lastMsOfTick);
  }

  private assertOpen(): void {
    if (this.closing) throw new IdmintError('NOT_READY', 'the Snowflake source is closed');
  }
}

/**
 * Checks the layout against the clock (IDs ≥ 2^53, invariant 4), acquires a worker id that fits
 * it (refusing while the clock is behind the ZooKeeper report or local mark, invariant 6), and
 * returns a ready source. Nothing is left registered or open when it throws.
 */
export async function createSnowflakeSource(options: SnowflakeSourceOptions): Promise<SnowflakeSource> {
  // The generator checks and defaults the rest of its options (core/snowflake.ts).
  const {
    provider,
    layout,
    clock,
    logger: parent,
    datacenterId,
    maxBackwardsMs,
  } = resolveOptions({ layout: LEAF_LAYOUT, clock: systemClock, logger: silentLogger }, options);
  const logger = parent.child({ component: 'snowflake-source' });
  assertLayoutUsable(layout, clock.now(), logger);
  const lease = await provider.acquire({ maxWorkerId: layout.maxWorkerId });
  try {
    const generator = new SnowflakeGenerator({ workerId: lease.workerId, layout, clock, logger: parent, datacenterId, maxBackwardsMs });
    logger.info({ workerId: lease.workerId, provider: lease.provider, layout: layout.name }, 'snowflake source ready');
    return new SnowflakeSource(generator, lease);
  } catch (err) {
    await lease.close();
    throw err;
  }
}
