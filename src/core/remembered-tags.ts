import { IdmintError } from './errors.js';
import { LastKnown, type KnownValue } from './last-known.js';
import type { BizStore, BizTag } from './ports.js';

/** How long a page waits for the tag list before answering with the one last read. */
export const TAG_READ_TIMEOUT_MS = 2000;

/**
 * The tag list as last read from Postgres: the dashboard, the status page and the pool sampler
 * keep showing every tag while Postgres is down (and say since when), instead of answering 503.
 */
export class RememberedTags implements Pick<BizStore, 'listBiz'> {
  private readonly known: LastKnown<BizTag[]>;

  constructor(store: Pick<BizStore, 'listBiz'>, timeoutMs: number = TAG_READ_TIMEOUT_MS) {
    this.known = new LastKnown(() => store.listBiz(), { what: 'reading the tags from the database', timeoutMs });
  }

  /** The tags now, or as last read with why they could not be read now. */
  read(): Promise<KnownValue<BizTag[]>> {
    return this.known.get();
  }

  /** The tags now, or as last read; throws only when they were never read. */
  async listBiz(): Promise<BizTag[]> {
    const { value, error } = await this.read();
    if (value) return value;
    throw new IdmintError('NOT_READY', `the tags cannot be read: ${error ?? 'unknown error'}`);
  }
}
