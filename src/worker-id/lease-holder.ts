import { performance } from 'node:perf_hooks';
import { ClockBackwardsError, IdmintError } from '../core/errors.js';
import { Episode, type Dependency } from '../core/episode.js';
import type { Logger } from '../core/logger.js';
import type { Clock, WorkerIdLease } from '../core/ports.js';
import { sleep } from '../core/retry.js';
import type { LocalTimeMark } from './local-time-mark.js';
import type { TakeOutcome, WorkerIdRegistry } from './registry.js';

/** A monotonic millisecond clock: lease deadlines must not move when the wall clock is stepped. */
export type Monotonic = () => number;
export const monotonicNow: Monotonic = () => performance.now();

export interface LeaseHolderOptions {
  registry: WorkerIdRegistry;
  workerId: number;
  /** The layout's largest id (the registry's `open` takes it). */
  maxWorkerId: number;
  /** This process's token (leased-provider.ts). */
  token: string;
  identity: string;
  /** Tokens of this data directory's earlier processes: a lease of theirs may be taken over at once. */
  predecessors: readonly string[];
  /** Issue nothing stamped at or below this (the id's previous holder's mark). */
  floorMs: number;
  /** Whether the local clock mark (`mark`) already covers the predecessors' IDs under this id. */
  markCoversPredecessors: boolean;
  mark: LocalTimeMark;
  clock: Clock;
  monotonic: Monotonic;
  logger: Logger;
  renewEveryMs: number;
  stopMarginMs: number;
  /** Why the lease starts pending (the registry was unreachable at start), or undefined for a held lease. */
  pendingReason?: string;
  /** When the take that made the lease was sent (monotonic ms). */
  takenAt?: number;
  /** How long `close` waits for the release. Default 2000 ms. */
  closeTimeoutMs?: number;
}

/** What every reclaiming provider returns: `registered` is true while the lease is held and renewed (for /readyz and tests). */
export interface LeasedWorkerIdLease extends WorkerIdLease {
  readonly registered: boolean;
  /** Issue nothing at or below this; raised when the id was taken again after a loss. */
  readonly floorMs: number;
  /** The highest timestamp the registry has confirmed for this holder. */
  readonly confirmedMs: number;
}

/**
 * Holds one worker id in a registry: renews the lease and raises the id's mark ahead of issuing,
 * and vetoes any ID that is not covered. An ID stamped `t` passes only while
 *   floor < t ≤ confirmed mark   and   now < (last renewal sent) + lease − margin,
 * so the holder never issues above what the registry records for the id, and stops before its
 * lease could have expired there (the argument is in leased-provider.ts). A holder the registry no
 * longer names stops at once and tries to take its id again; if another holder has it, the lease
 * is revoked for good (restart to get another id).
 */
export class LeaseHolder implements LeasedWorkerIdLease {
  readonly workerId: number;
  readonly provider: string;
  private floor: number;
  private confirmed = Number.NEGATIVE_INFINITY;
  private deadline = Number.NEGATIVE_INFINITY;
  private maxIssued = Number.NEGATIVE_INFINITY;
  private pendingReason: string | undefined;
  private revoked: IdmintError | null = null;
  private closed: Promise<void> | null = null;
  private running: Promise<void> | null = null;
  /** A re-take landed and its first renewal is on its way: not `registered` until the mark is confirmed. */
  private settling = false;
  private readonly timer: NodeJS.Timeout;
  private readonly unreachable: Episode;

  private constructor(private readonly o: LeaseHolderOptions) {
    this.workerId = o.workerId;
    this.provider = o.registry.kind;
    this.floor = o.floorMs;
    this.pendingReason = o.pendingReason;
    if (o.takenAt !== undefined) this.deadline = o.takenAt + o.registry.leaseMs() - o.stopMarginMs;
    this.unreachable = new Episode(
      o.logger,
      `worker-id registry (${o.registry.where}) unreachable; worker ${o.workerId} issues until its lease could expire, then waits`,
      { dependency: dependencyNamed(o.registry.kind) },
    );
    this.timer = setInterval(() => this.kick(), o.renewEveryMs);
    this.timer.unref();
    o.registry.onLeaseLost?.(() => this.lost('the registry session that held the lease expired'));
  }

  /** A lease just taken: its first renewal (which raises the mark past now) must land. */
  static async start(options: LeaseHolderOptions): Promise<LeaseHolder> {
    const holder = new LeaseHolder(options);
    try {
      await holder.renew(true);
    } catch (err) {
      await holder.close();
      throw err;
    }
    return holder;
  }

  /** A lease that waits to be taken (the registry was unreachable at start): it issues nothing until then. */
  static pending(options: LeaseHolderOptions & { pendingReason: string }): LeaseHolder {
    const holder = new LeaseHolder(options);
    holder.kick();
    return holder;
  }

  get floorMs(): number {
    return this.floor;
  }

  get confirmedMs(): number {
    return this.confirmed;
  }

  get registered(): boolean {
    return !this.closed && !this.revoked && !this.settling && this.pendingReason === undefined && this.o.monotonic() < this.deadline;
  }

  health(): { ok: boolean; message?: string } {
    const { registry, workerId } = this.o;
    if (this.revoked) return { ok: false, message: this.revoked.message };
    if (this.pendingReason !== undefined) return { ok: false, message: `worker id ${workerId} is not leased yet: ${this.pendingReason}` };
    if (this.o.monotonic() >= this.deadline)
      return { ok: false, message: `the lease of worker id ${workerId} in ${registry.where} was not renewed in time; no Snowflake IDs until it is` };
    if (this.unreachable.active) return { ok: false, message: `${registry.where} is unreachable; worker ${workerId} issues until its lease could expire` };
    return { ok: true };
  }

  assertIssuable(timestampMs: number): void {
    if (this.revoked) throw this.revoked;
    if (this.closed) throw new IdmintError('NOT_READY', `the worker-id lease (${this.provider} ${this.workerId}) is closed`);
    if (this.pendingReason !== undefined) {
      this.kick();
      throw new IdmintError('NOT_READY', `worker id ${this.workerId} is not leased yet: ${this.pendingReason}`);
    }
    if (timestampMs <= this.floor) {
      throw new ClockBackwardsError(
        this.floor,
        timestampMs,
        `worker id ${this.workerId}: ${iso(timestampMs)} is not past the id's mark ${iso(this.floor)} (its previous holder may have issued up to it); waiting for the clock to pass it`,
      );
    }
    if (this.o.monotonic() >= this.deadline) {
      this.kick();
      throw new IdmintError(
        'NOT_READY',
        `the lease of worker id ${this.workerId} in ${this.o.registry.where} was not renewed in time: it could expire and the id be taken, so no Snowflake IDs until a renewal lands`,
        {
          details: { dependency: dependencyNamed(this.o.registry.kind) },
        },
      );
    }
    if (timestampMs > this.confirmed) {
      this.kick();
      throw new IdmintError(
        'NOT_READY',
        `worker id ${this.workerId}: ${iso(timestampMs)} is past the mark ${this.o.registry.where} has confirmed (${iso(this.confirmed)}); waiting for a renewal`,
      );
    }
    this.o.mark.assertIssuable(timestampMs);
    if (timestampMs > this.maxIssued) this.maxIssued = timestampMs;
    // Halfway through the confirmed stretch, renew early: a steady issuer never meets the mark.
    if (timestampMs > this.confirmed - this.o.registry.leaseMs() / 2) this.kick();
  }

  /** Idempotent. Lowers the id's mark to the highest timestamp approved, then ends the lease: the id is free at once. */
  close(): Promise<void> {
    this.closed ??= (async () => {
      clearInterval(this.timer);
      await this.running?.catch(() => undefined);
      const { registry, workerId, token, logger } = this.o;
      if (this.pendingReason === undefined && !this.revoked) {
        // Nothing is approved after `closed` is set (assertIssuable is synchronous), so maxIssued is final.
        const finalMs = Math.max(this.maxIssued, this.floor);
        // Bounded: a registry that does not answer lets the lease expire by itself, its mark where it was.
        const released = registry.release(workerId, token, finalMs).then(
          () => true,
          (err: unknown) => (logger.warn({ err, workerId }, 'could not release the worker-id lease; it expires by itself'), true),
        );
        const timer = sleep(this.o.closeTimeoutMs ?? 2000, { unref: true }).then(() => false);
        if (!(await Promise.race([released, timer])))
          logger.warn({ workerId }, 'the worker-id registry did not answer the release in time; the lease expires by itself');
      }
      await registry.close().catch(() => undefined);
    })();
    return this.closed;
  }

  /** Runs one renewal (or re-take) unless one is under way. */
  private kick(): void {
    if (this.closed || this.revoked || this.running) return;
    this.running = (this.pendingReason === undefined ? this.renew(false) : this.retake())
      .catch((err: unknown) => this.o.logger.debug({ err }, 'worker-id lease renewal failed'))
      .finally(() => (this.running = null));
  }

  private async renew(strict: boolean): Promise<void> {
    const { registry, workerId, token, clock, monotonic, stopMarginMs } = this.o;
    const leaseMs = registry.leaseMs();
    const markMs = Math.max(this.confirmed, Math.max(clock.now(), this.floor) + leaseMs);
    const sentAt = monotonic();
    let outcome;
    try {
      outcome = await registry.renew(workerId, token, markMs);
    } catch (err) {
      if (strict) throw wrap(err, `could not record worker id ${workerId}'s mark in ${registry.where}`);
      this.unreachable.fail({ workerId }, (err as Error).message);
      return;
    }
    if (outcome === 'lost') {
      if (strict) throw new IdmintError('WORKER_ID_UNAVAILABLE', `worker id ${workerId} was taken by another holder in ${registry.where} while starting`);
      this.lost(`${registry.where} no longer names this process as the holder`);
      return;
    }
    this.unreachable.recover({ workerId });
    if (markMs > this.confirmed) this.confirmed = markMs;
    const until = sentAt + leaseMs - stopMarginMs;
    if (until > this.deadline) this.deadline = until;
  }

  /** The lease is gone: stop at once, then try to take the id again. */
  private lost(reason: string): void {
    if (this.closed || this.revoked || this.pendingReason !== undefined) return;
    this.deadline = Number.NEGATIVE_INFINITY;
    this.pendingReason = reason;
    this.o.logger.warn({ workerId: this.workerId, reason }, 'worker-id lease lost; no Snowflake IDs until the id is taken again');
    setImmediate(() => this.kick());
  }

  private async retake(): Promise<void> {
    const { registry, workerId, token, identity, predecessors, logger, monotonic, stopMarginMs } = this.o;
    const sentAt = monotonic();
    let outcome: TakeOutcome;
    try {
      await registry.open(this.o.maxWorkerId);
      outcome = await registry.take({ workerId, token, identity, successorOf: [token, ...predecessors] });
    } catch (err) {
      this.unreachable.fail({ workerId }, (err as Error).message);
      return;
    }
    this.unreachable.recover({ workerId });
    if (!outcome.taken) {
      if (outcome.heldBy && outcome.heldBy.identity !== identity) {
        this.revoked = new IdmintError(
          'WORKER_ID_UNAVAILABLE',
          `worker id ${workerId} is held by ${outcome.heldBy.identity} in ${registry.where}; this process issues no more Snowflake IDs (restart it to take another id)`,
          {
            details: { workerId, holder: outcome.heldBy.identity },
          },
        );
        logger.error({ workerId, holder: outcome.heldBy.identity }, 'worker id taken by another holder; no more IDs from this lease');
      }
      return; // held under this identity (a predecessor still alive): wait for its lease to expire
    }
    // Who may have issued under the id: ourselves (up to maxIssued), a predecessor in this data
    // directory (up to the local mark, which the LocalTimeMark already holds us above), or anyone
    // else (up to the registry's mark, which their holding raised first).
    const ours = outcome.previousHolder === token;
    const predecessor = outcome.previousHolder !== null && predecessors.includes(outcome.previousHolder) && this.o.markCoversPredecessors;
    const others = ours || predecessor ? Number.NEGATIVE_INFINITY : outcome.floorMs;
    this.floor = Math.max(this.floor, this.maxIssued, outcome.guardMs, others);
    this.deadline = sentAt + registry.leaseMs() - stopMarginMs;
    this.pendingReason = undefined;
    this.settling = true;
    try {
      await this.renew(false);
    } finally {
      this.settling = false;
    }
    logger.info({ workerId, floorMs: this.floor }, 'worker id leased again');
  }
}

/** The registry's kind as a server whose outage is logged once (core/episode.ts), when it is one. */
function dependencyNamed(kind: string): Dependency | undefined {
  return kind === 'zookeeper' || kind === 'redis' || kind === 'postgres' ? kind : undefined;
}

function wrap(err: unknown, what: string): IdmintError {
  if (err instanceof IdmintError) return err;
  return new IdmintError('WORKER_ID_UNAVAILABLE', `${what}: ${(err as Error).message}`, { cause: err });
}

function iso(ms: number): string {
  return Number.isFinite(ms) ? new Date(ms).toISOString() : String(ms);
}
