import type { Logger } from '../core/logger.js';
import { isLeaderNotAvailable } from './errors.js';
import type { TopicAdmin } from './ports.js';

/**
 * The reply topics known to exist, so a reply never waits on the driver's retries for a topic
 * that is not there. One listing serves every request that arrived before it started.
 */
export class ReplyTopics {
  private readonly known = new Set<string>();
  private refresh: { startedAt: number; done: Promise<boolean> } | undefined;

  constructor(
    private readonly admin: TopicAdmin,
    private readonly logger: Logger,
  ) {}

  /** Whether `topic` exists; a listing started after `since` (performance.now()) is fresh enough to trust a "missing". */
  async exists(topic: string, since: number): Promise<boolean> {
    if (this.known.has(topic)) return true;
    if (!this.refresh || this.refresh.startedAt < since) {
      const startedAt = performance.now();
      const done = this.admin.listTopics().then(
        (names) => {
          this.known.clear();
          for (const n of names) this.known.add(n);
          return true;
        },
        (err: unknown) => {
          // A listing fails whole while any partition in the cluster has no leader (KafkaJS):
          // reply anyway; a reply topic that is gone fails its send, as a missing one would.
          if (!isLeaderNotAvailable(err)) throw err;
          this.logger.debug({ err }, 'listing the topics failed (a partition without a leader); replying without the check');
          return false;
        },
      );
      this.refresh = { startedAt, done };
    }
    return (await this.refresh.done) ? this.known.has(topic) : true;
  }

  /** A send to `topic` failed: look it up again next time. */
  forget(topic: string): void {
    this.known.delete(topic);
  }
}
