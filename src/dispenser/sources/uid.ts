import { CachedUidGenerator } from '../../core/cached-uid.js';
import type { Layout } from '../../core/layout.js';
import { UID_LAYOUT } from '../../core/layout.js';
import { systemClock, type BizTag, type Clock, type IdSource, type WorkerIdLease, type WorkerIdProvider } from '../../core/ports.js';
import { silentLogger, type Logger } from '../../core/logger.js';
import { resolveOptions } from '../../core/options.js';
import { annotate } from '../../tracing/tracer.js';
import { ATTR } from '../../tracing/dispense.js';

export interface UidSourceOptions {
  /** uid-generator assigns a fresh worker id on every start: the Postgres provider does. */
  provider: WorkerIdProvider;
  layout?: Layout;
  clock?: Clock;
  logger?: Logger;
}

/**
 * `uid`-mode tags: uid-generator's CachedUidGenerator, whose ring buffer is a pool of IDs
 * minted ahead. Started on first use, so a process without uid tags takes no worker node.
 */
export class UidSource implements IdSource {
  readonly name = 'pool' as const;
  private starting: Promise<{ generator: CachedUidGenerator; lease: WorkerIdLease }> | undefined;

  private readonly options: Readonly<Required<UidSourceOptions>>;

  constructor(options: UidSourceOptions) {
    // The generator checks the rest when the first uid request starts it (core/cached-uid.ts).
    this.options = resolveOptions({ layout: UID_LAYOUT, clock: systemClock, logger: silentLogger }, options);
  }

  async take(_tag: BizTag, count: number): Promise<string[]> {
    const { generator, lease } = await this.start();
    annotate(ATTR.workerId, lease.workerId);
    // At hand-out, not only when the ring is filled: a lease refused meanwhile (the deployment's
    // region split recorded under this process) stops IDs already minted ahead too.
    lease.assertIssuable(this.options.clock.now());
    return generator.getUids(count).map(String);
  }

  async close(): Promise<void> {
    const started = this.starting;
    this.starting = undefined;
    if (!started) return;
    const { generator, lease } = await started.catch(() => ({ generator: undefined, lease: undefined }));
    generator?.close();
    await lease?.close();
  }

  private start(): Promise<{ generator: CachedUidGenerator; lease: WorkerIdLease }> {
    this.starting ??= (async () => {
      const { provider, layout, clock, logger } = this.options;
      const lease = await provider.acquire({ maxWorkerId: layout.maxWorkerId });
      try {
        const generator = new CachedUidGenerator({ workerId: lease.workerId, layout, clock, logger });
        generator.start();
        return { generator, lease };
      } catch (err) {
        await lease.close();
        throw err;
      }
    })().catch((err: unknown) => {
      // Let the next request try again rather than caching the failure.
      this.starting = undefined;
      throw err;
    });
    return this.starting;
  }
}
