import { checkInteger, defaults, resolveOptions } from '../core/options.js';

/**
 * Big answers take turns with everything else the event loop does. Each request for many IDs
 * asks for a turn before its work (taking the IDs, then serialising them); turns are handed out
 * in arrival order, at most `sliceIds` IDs' worth per turn of the event loop, and between turns
 * the loop reads its sockets. So /healthz and /readyz, and small requests, wait for one slice
 * (a few ms) however many big requests are queued — not for all of them: 200 requests for 10,000
 * IDs each, all handled in the poll phase that read them, kept health probes waiting for seconds.
 * The price, under overload only: requests waiting for a turn wait parsed, in memory, where
 * without turns they waited unread in their sockets (bench/RESULTS.md, health).
 */
export interface PacerOptions {
  /** IDs' worth of work handed out per turn of the event loop (at least one request's); 0 = no turns. Default 20,000. */
  sliceIds: number;
  /** Requests for fewer IDs than this run without a turn: their work is small. Default 1,000. */
  fromIds: number;
}

export const PACER_DEFAULTS = defaults<PacerOptions>({ sliceIds: 20_000, fromIds: 1000 });

/** A request's turns: `start` before its work begins, `finish` for the rest of work under way. */
export type TurnKind = 'start' | 'finish';

export class Pacer {
  private readonly options: Readonly<PacerOptions>;
  /** Work under way goes first: a request that holds its IDs is finished before another takes its own, so few sets of IDs wait in memory at once. */
  private readonly queues: Record<TurnKind, Array<{ ids: number; go: () => void }>> = { finish: [], start: [] };
  private scheduled = false;

  constructor(options: Partial<PacerOptions> = {}) {
    this.options = resolveOptions(PACER_DEFAULTS, options, (o) => {
      checkInteger('Pacer', o, 'sliceIds', 0);
      checkInteger('Pacer', o, 'fromIds', 1);
    });
  }

  /** Turns waiting now (for tests and metrics). */
  get waiting(): number {
    return this.queues.finish.length + this.queues.start.length;
  }

  /**
   * Resolves when work on `ids` IDs may run; undefined when it may run at once (a small request).
   * The caller runs its turn's work synchronously after it resolves: that is what the slice bounds.
   */
  turn(ids: number, kind: TurnKind = 'start'): Promise<void> | undefined {
    if (ids < this.options.fromIds || this.options.sliceIds === 0) return undefined;
    return new Promise((go) => {
      this.queues[kind].push({ ids, go });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // setImmediate from within an immediate runs on the loop's next turn, after its poll phase.
    setImmediate(this.release);
  }

  private readonly release = (): void => {
    this.scheduled = false;
    let spent = 0;
    for (;;) {
      const queue = this.queues.finish.length > 0 ? this.queues.finish : this.queues.start;
      const next = queue[0];
      if (!next || (spent > 0 && spent + next.ids > this.options.sliceIds)) break;
      queue.shift();
      spent += next.ids;
      next.go();
    }
    if (this.waiting > 0) this.schedule();
  };
}
