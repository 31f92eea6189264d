import { randomBytes } from 'node:crypto';
import { ClockBackwardsError, IdmintError } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { checkInteger, defaults, OptionsError, resolveOptions } from '../core/options.js';
import { systemClock, type Clock, type WorkerIdProvider } from '../core/ports.js';
import { sleep } from '../core/retry.js';
import { leaseFilePath, readLeaseFile, writeLeaseFile, type LeaseFileState } from './lease-file.js';
import { LeaseHolder, monotonicNow, type LeasedWorkerIdLease, type Monotonic } from './lease-holder.js';
import { checkWorkerIdRange } from './lease.js';
import { LocalTimeMark, localMarkPath, readLocalMark, type LocalMarkState } from './local-time-mark.js';
import type { RegistryListing, TakeOutcome, WorkerIdRegistry } from './registry.js';

export interface LeasedWorkerIdOptions {
  /** Who this process is in the registry: its `ip:port` (IDMINT_ADVERTISE), a pod's stable address. */
  identity: string;
  /** Local state: the lease file (this process's token) and the clock mark. Default `./data`. */
  dataDir?: string;
  /**
   * The id to prefer, e.g. a StatefulSet pod's ordinal (IDMINT_WORKER_ID_ORDINAL). While it is held
   * under this identity (a replaced pod that still runs) the start waits for that lease to expire;
   * held under another identity, another id is taken.
   */
  preferredWorkerId?: number;
  /** How long a start waits for the preferred id's lease before it gives up. Default 60000 ms. */
  preferredWaitMs?: number;
  /** Renewal period. Default a quarter of the lease. */
  renewEveryMs?: number;
  /** The holder stops issuing this long before its lease could expire in the registry. Default 1000 ms. */
  stopMarginMs?: number;
  /** Pause between attempts while waiting for an id. Default 1000 ms. */
  retryEveryMs?: number;
  /** The longest a start waits for a registry-wide guard (the registry may have lost writes). Default 30000 ms. */
  maxGuardWaitMs?: number;
  clock?: Clock;
  logger?: Logger;
  /** For tests: the clock lease deadlines run on. Default `performance.now`. */
  monotonic?: Monotonic;
  /** See LocalTimeMarkOptions: the local mark's lead, and how far behind a mark (local or an id's) a start waits. */
  markAheadMs?: number;
  maxStartWaitMs?: number;
}

export const LEASED_WORKER_ID_DEFAULTS = defaults({
  dataDir: './data',
  preferredWaitMs: 60_000,
  stopMarginMs: 1000,
  retryEveryMs: 1000,
  maxGuardWaitMs: 30_000,
  markAheadMs: 1000,
  maxStartWaitMs: 1500,
});

type Settings = Readonly<LeasedWorkerIdOptions & typeof LEASED_WORKER_ID_DEFAULTS & { clock: Clock; logger: Logger; monotonic: Monotonic }>;

/**
 * Worker ids that are reclaimed: a process takes any id whose lease is gone, so restarts with new
 * addresses (a Deployment's pods) never use the space up, yet no ID is ever issued twice.
 *
 * The argument (docs/reliability.md, "Worker ids"). Every id has a record in the registry with a
 * mark M: no timestamp above M has been approved under the id by anyone but its current holder.
 * A holder H has a floor F (the mark when it took the id) and a confirmed mark C (the highest mark
 * it wrote while the record still named it), and approves an ID stamped t only if F < t ≤ C.
 *  1. The registry changes a record only by compare-and-set on the holder, in one server-side
 *     step: a take succeeds only while no live lease exists and names a new holder (a fresh token
 *     per process start); a renewal (raise M, extend the lease) or a release only while the record
 *     still names the caller. So the holders of an id form a sequence, and every write of one
 *     precedes the next one's take.
 *  2. While it holds, a holder only raises M, before approving past it (C is what it wrote). A
 *     release lowers M to the highest timestamp its holder approved, after it stopped approving.
 *  3. Hence when the next holder takes the id, M is at least every timestamp any earlier holder
 *     approved, it becomes the new floor, and everything the new holder approves lies above it.
 * Timestamps under one id therefore never meet across holders, and within one holder the generator
 * never repeats a (timestamp, sequence). This uses no clock comparison between processes: both
 * sides of each comparison are timestamps stamped into IDs of the same id. It needs a registry that
 * keeps what it acknowledged: ZooKeeper (a quorum) does; Postgres and Redis are guarded when they
 * may have lost writes (a new timeline, a new run id): every take then floors at the guard's time
 * plus two leases, which is safe while clocks agree within a lease (see their registries).
 *
 * Two refinements keep restarts quick without weakening it: a process that finds a live lease of
 * an earlier process of its own data directory (its token is in the lease file, and the data
 * directory lock says that process is gone) takes the lease over at once, its floor then that
 * process's local clock mark, which was written before any ID past it left; and a holder whose own
 * lease lapsed takes it back with its floor at the highest timestamp it approved.
 *
 * Liveness, not uniqueness, rests on the lease: a renewal sent at s keeps the lease at least until
 * s + lease in the registry (Postgres `now()`, Redis key TTLs, ZooKeeper's session timeout all
 * count from when the server saw it), and the holder stops approving at s + lease − margin on its
 * own monotonic clock. So a live process stops before anyone can take its id: two live processes
 * never issue under one id at the same time, and a replacement waits for (or is told why it waits
 * for) the lease of a predecessor that is still alive.
 */
export class LeasedWorkerIdProvider implements WorkerIdProvider {
  readonly options: Settings;

  constructor(
    private readonly makeRegistry: () => WorkerIdRegistry,
    /** Names the local files: one lease file and one clock mark per registry and identity. */
    readonly key: string,
    options: LeasedWorkerIdOptions,
  ) {
    this.options = resolveOptions({ ...LEASED_WORKER_ID_DEFAULTS, clock: systemClock, logger: silentLogger, monotonic: monotonicNow }, options, (s) => {
      if (typeof s.identity !== 'string' || !/^\S{1,200}$/.test(s.identity))
        throw new OptionsError('LeasedWorkerIdProvider', 'identity', `must be a name without spaces, got "${String(s.identity)}"`);
      if (s.preferredWorkerId !== undefined) checkInteger('LeasedWorkerIdProvider', s, 'preferredWorkerId', 0);
      for (const k of ['preferredWaitMs', 'stopMarginMs', 'retryEveryMs', 'maxGuardWaitMs', 'maxStartWaitMs'] as const)
        checkInteger('LeasedWorkerIdProvider', s, k, 0);
      checkInteger('LeasedWorkerIdProvider', s, 'markAheadMs', 1);
      if (s.renewEveryMs !== undefined) checkInteger('LeasedWorkerIdProvider', s, 'renewEveryMs', 10);
    });
  }

  get leaseFilePath(): string {
    return leaseFilePath(this.options.dataDir, this.key);
  }

  get markPath(): string {
    return localMarkPath(this.options.dataDir, this.key);
  }

  async acquire({ maxWorkerId }: { maxWorkerId: number }): Promise<LeasedWorkerIdLease> {
    const o = this.options;
    checkWorkerIdRange(0, maxWorkerId, 'the layout');
    if (o.preferredWorkerId !== undefined) checkWorkerIdRange(o.preferredWorkerId, maxWorkerId, 'the preferred id (IDMINT_WORKER_ID_ORDINAL)');
    const earlier = readLeaseFile(this.leaseFilePath);
    const previousMark = readLocalMark(this.markPath);
    const predecessors = earlier ? [earlier.token, ...earlier.predecessors].slice(0, 8) : [];
    const token = randomBytes(12).toString('hex');
    const registry = this.makeRegistry();
    // The token is on disk before any lease carries it, so a successor in this directory knows it.
    this.writeFile({ token, predecessors, registry: registry.kind });
    try {
      await registry.open(maxWorkerId);
    } catch (err) {
      // The registry stays with the pending lease, which opens it again until it answers.
      return this.startPending(registry, err, previousMark, token, predecessors, maxWorkerId).catch(async (e: unknown) => {
        await registry.close().catch(() => undefined);
        throw e;
      });
    }
    try {
      return await this.take(registry, maxWorkerId, token, predecessors, previousMark);
    } catch (err) {
      await registry.close().catch(() => undefined);
      if (err instanceof IdmintError) throw err;
      throw new IdmintError('WORKER_ID_UNAVAILABLE', `could not lease a worker id in ${registry.where}: ${(err as Error).message}`, { cause: err });
    }
  }

  private writeFile(state: Omit<LeaseFileState, 'version' | 'updatedAt'>): void {
    try {
      writeLeaseFile(this.leaseFilePath, state);
    } catch (err) {
      throw new IdmintError('WORKER_ID_UNAVAILABLE', `cannot write the worker-id lease file ${this.leaseFilePath}: ${(err as Error).message}`, { cause: err });
    }
  }

  /**
   * The registry is down at start: with an id from this directory's last process, start on it but
   * issue nothing until it is leased again (its lease may have expired and the id be taken
   * meanwhile); without one, refuse.
   */
  private async startPending(
    registry: WorkerIdRegistry,
    err: unknown,
    previousMark: LocalMarkState | null,
    token: string,
    predecessors: string[],
    maxWorkerId: number,
  ): Promise<LeasedWorkerIdLease> {
    const o = this.options;
    const cached = previousMark?.workerId;
    if (cached === undefined || cached > maxWorkerId) {
      throw new IdmintError(
        'WORKER_ID_UNAVAILABLE',
        `${registry.where} is unreachable and there is no cached worker id in ${this.markPath}: ${(err as Error).message}`,
        {
          cause: err,
          details: { where: registry.where, path: this.markPath },
        },
      );
    }
    o.logger.warn(
      { err, workerId: cached, where: registry.where },
      'worker-id registry unreachable at start; using the cached worker id once it is leased again (no Snowflake IDs until then)',
    );
    const mark = await LocalTimeMark.start({ ...o, key: this.key, workerId: cached, source: registry.kind, previous: previousMark });
    return LeaseHolder.pending({
      ...this.holderOptions(registry, maxWorkerId, token, predecessors, mark),
      workerId: cached,
      floorMs: previousMark!.markMs,
      markCoversPredecessors: true,
      pendingReason: `${registry.where} was unreachable at start`,
    });
  }

  private holderOptions(registry: WorkerIdRegistry, maxWorkerId: number, token: string, predecessors: string[], mark: LocalTimeMark) {
    const o = this.options;
    return {
      registry,
      maxWorkerId,
      token,
      identity: o.identity,
      predecessors,
      mark,
      clock: o.clock,
      monotonic: o.monotonic,
      logger: o.logger.child({ component: `worker-id-${registry.kind}` }),
      renewEveryMs: o.renewEveryMs ?? Math.max(100, Math.floor(registry.leaseMs() / 4)),
      stopMarginMs: o.stopMarginMs,
    };
  }

  private async take(
    registry: WorkerIdRegistry,
    maxWorkerId: number,
    token: string,
    predecessors: string[],
    previousMark: LocalMarkState | null,
  ): Promise<LeasedWorkerIdLease> {
    const o = this.options;
    const request = (workerId: number) => ({ workerId, token, identity: o.identity, successorOf: predecessors });
    let behind: { workerId: number; floorMs: number } | undefined;
    let preferredHeldBy: string | undefined;
    for (let round = 0; round < 3; round++) {
      const listing = await registry.list(maxWorkerId);
      for (const workerId of this.candidates(listing, maxWorkerId, [o.preferredWorkerId, previousMark?.workerId])) {
        const preferred = workerId === o.preferredWorkerId;
        let sentAt = o.monotonic();
        let outcome: TakeOutcome = await registry.take(request(workerId));
        // The preferred id held under this identity: a replaced pod that may still issue. Wait for its lease.
        for (const giveUpAt = sentAt + o.preferredWaitMs; preferred && !outcome.taken && this.ownHolder(outcome) && o.monotonic() < giveUpAt;) {
          if (preferredHeldBy === undefined) {
            o.logger.warn(
              { workerId, identity: o.identity, where: registry.where, waitMs: o.preferredWaitMs },
              `worker id ${workerId} (this pod's ordinal) is still leased under this identity, by a process that may still run (a replaced pod); waiting for its lease to expire before taking it over`,
            );
          }
          preferredHeldBy = outcome.heldBy?.identity ?? 'an unknown holder';
          await sleep(o.retryEveryMs);
          sentAt = o.monotonic();
          outcome = await registry.take(request(workerId));
        }
        if (!outcome.taken) {
          if (preferred && !this.ownHolder(outcome))
            o.logger.warn({ workerId, holder: outcome.heldBy?.identity }, `worker id ${workerId} (preferred) is held by another process; taking another id`);
          if (preferred && this.ownHolder(outcome)) {
            throw new IdmintError(
              'WORKER_ID_UNAVAILABLE',
              `worker id ${workerId} (this pod's ordinal) is still leased under ${o.identity} in ${registry.where} after waiting ${o.preferredWaitMs} ms: another process with this identity is still alive; stop it (or raise IDMINT_WORKER_ID_WAIT_MS)`,
              {
                details: { workerId, identity: o.identity },
              },
            );
          }
          continue;
        }
        const lease = await this.settle(registry, workerId, outcome, { sentAt, maxWorkerId, token, predecessors, previousMark, preferred });
        if ('behindMs' in lease) {
          if (!behind || lease.floorMs < behind.floorMs) behind = { workerId, floorMs: lease.floorMs };
          continue;
        }
        return lease.lease;
      }
    }
    if (behind) {
      const now = o.clock.now();
      throw new ClockBackwardsError(
        behind.floorMs,
        now,
        `every free worker id's mark is ahead of this clock (worker ${behind.workerId}: mark ${new Date(behind.floorMs).toISOString()}, now ${new Date(now).toISOString()}); refusing to start: its previous holder may have issued up to the mark`,
      );
    }
    throw new IdmintError(
      'WORKER_ID_UNAVAILABLE',
      `no worker id free in ${registry.where}: every id of 0..${maxWorkerId} is leased or reserved; the worker-id space is exhausted (more live processes than ids)`,
      {
        details: { where: registry.where, maxWorkerId },
      },
    );
  }

  private ownHolder(outcome: TakeOutcome): boolean {
    return !outcome.taken && (outcome.heldBy === undefined || outcome.heldBy.identity === this.options.identity);
  }

  /**
   * The order ids are tried in: the preferred one, this directory's last one, ids this identity
   * held before, then free ids from the top down (the bottom is left to ordinals): known ones whose
   * mark the clock has passed, never-used ones, and last known ones whose mark is still ahead (a
   * holder that died a moment ago). Concurrent starts begin at different places among equals.
   */
  private *candidates(listing: RegistryListing, maxWorkerId: number, first: Array<number | null | undefined>): Generator<number> {
    const seen = new Set<number>();
    const usable = (id: number | undefined | null): id is number =>
      typeof id === 'number' && id >= 0 && id <= maxWorkerId && !seen.has(id) && !listing.reserved.has(id);
    const soon = this.options.clock.now() + this.options.maxStartWaitMs;
    const mine = [...listing.known].filter(([id, r]) => r.identity === this.options.identity && !listing.held.has(id)).map(([id]) => id);
    const free = [...listing.known].filter(([id]) => !listing.held.has(id));
    const passed = free.filter(([, r]) => (r.markMs ?? 0) <= soon).map(([id]) => id);
    const ahead = free
      .filter(([, r]) => (r.markMs ?? 0) > soon)
      .sort(([, a], [, b]) => (a.markMs ?? 0) - (b.markMs ?? 0))
      .map(([id]) => id);
    const ordered = function* (): Generator<number | null | undefined> {
      yield* first;
      yield* mine.sort((a, b) => a - b);
      yield* rotate(passed.sort((a, b) => b - a));
      for (let id = maxWorkerId; id >= 0; id--) if (!listing.held.has(id) && !listing.known.has(id)) yield id;
      yield* ahead;
    };
    for (const id of ordered()) {
      if (!usable(id)) continue;
      seen.add(id);
      yield id;
    }
  }

  /** Floors, waits and the local mark for an id just taken; gives it back when its mark is too far ahead. */
  private async settle(
    registry: WorkerIdRegistry,
    workerId: number,
    outcome: Extract<TakeOutcome, { taken: true }>,
    c: { sentAt: number; maxWorkerId: number; token: string; predecessors: string[]; previousMark: LocalMarkState | null; preferred: boolean },
  ): Promise<{ lease: LeasedWorkerIdLease } | { behindMs: number; floorMs: number }> {
    const o = this.options;
    // A dead predecessor of this directory issued nothing past its local mark: that is the floor then.
    const predecessor = outcome.previousHolder !== null && c.predecessors.includes(outcome.previousHolder) && c.previousMark?.workerId === workerId;
    const idFloor = predecessor ? c.previousMark!.markMs : outcome.floorMs;
    const giveBack = async () => registry.release(workerId, c.token, outcome.floorMs).catch(() => undefined);
    const behindMs = idFloor - o.clock.now();
    if (behindMs > o.maxStartWaitMs && !predecessor) {
      await giveBack();
      if (c.preferred) {
        throw new ClockBackwardsError(
          idFloor,
          o.clock.now(),
          `clock is ${behindMs} ms behind the mark of worker id ${workerId} (this pod's ordinal) in ${registry.where} (${new Date(idFloor).toISOString()}); refusing to start: its previous holder may have issued up to it`,
        );
      }
      return { behindMs, floorMs: idFloor };
    }
    const guardWait = outcome.guardMs - o.clock.now();
    if (guardWait > o.maxGuardWaitMs) {
      await giveBack();
      throw new IdmintError(
        'NOT_READY',
        `${registry.where} may have lost writes (a restart or failover); no worker id is used below ${new Date(outcome.guardMs).toISOString()}, ${guardWait} ms away, more than maxGuardWaitMs`,
      );
    }
    if (guardWait > 0)
      o.logger.warn(
        { workerId, waitMs: guardWait, where: registry.where },
        'the worker-id registry may have lost writes (restart or failover); waiting out the guard before issuing',
      );
    let mark: LocalTimeMark;
    const floorMs = Math.max(idFloor, outcome.guardMs);
    try {
      // Waits until the clock is past this directory's local mark (or refuses, CLOCK_BACKWARDS).
      mark = await LocalTimeMark.start({ ...o, key: this.key, workerId, source: registry.kind, previous: c.previousMark });
      await waitPast(o.clock, floorMs);
    } catch (err) {
      await giveBack();
      throw err;
    }
    // From here the holder owns the lease: a failed start releases it itself.
    const lease = await LeaseHolder.start({
      ...this.holderOptions(registry, c.maxWorkerId, c.token, c.predecessors, mark),
      workerId,
      floorMs,
      markCoversPredecessors: c.previousMark?.workerId === workerId,
      takenAt: c.sentAt,
    });
    o.logger.info({ workerId, where: registry.where, floorMs, identity: o.identity }, 'worker id leased');
    return { lease };
  }
}

/** The list from a random place (and round): concurrent starts do not all try the same id first. */
function rotate<T>(items: T[]): T[] {
  const at = Math.floor(Math.random() * items.length);
  return [...items.slice(at), ...items.slice(0, at)];
}

/** Sleeps until `clock` reads past `ms` (bounded by the caller's checks). */
async function waitPast(clock: Clock, ms: number): Promise<void> {
  for (let now = clock.now(); now <= ms; now = clock.now()) await sleep(Math.min(ms - now + 1, 50));
}
