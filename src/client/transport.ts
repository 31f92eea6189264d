import type { Block } from '../core/block.js';
import type { IdSourceName } from '../core/ports.js';

/** One answer from a transport: IDs as decimal strings (invariant 7) and where they came from. */
export interface IdsBatch {
  /** At least one ID on success; a transport that has none throws (POOL_EMPTY, NOT_READY...). */
  readonly ids: string[];
  readonly blocks?: undefined;
  /** `unknown` when the wire does not say (a Kafka pool topic). */
  readonly source: IdSourceName | 'unknown';
  /** A formatted tag's format (`base62`, `sqids`...), as the server said; absent for decimal IDs. */
  readonly format?: string;
}

/** One answer as contiguous ranges of segment IDs (safe integers): what `fetchBlocks` returns. */
export interface BlocksBatch {
  readonly blocks: readonly Block[];
  readonly ids?: undefined;
  readonly source: IdSourceName | 'unknown';
}

export type TransportBatch = IdsBatch | BlocksBatch;

/**
 * How the SDK reaches a dispenser. Implementations: httpTransport, kafkaTransport,
 * kafkaPoolTransport; tests write their own. `fetch` may return fewer than `count` IDs and
 * throws an IdmintError when it cannot serve; the IDs it returns must never be returned again.
 */
export interface IdTransport {
  fetch(bizTag: string, count: number): Promise<TransportBatch>;
  /**
   * `count` IDs as blocks (segment tags: `GET /v1/blocks`); optional. A tag whose IDs are not
   * contiguous answers BAD_REQUEST, and the SDK uses `fetch` for it from then on.
   */
  fetchBlocks?(bizTag: string, count: number): Promise<TransportBatch>;
  close(): Promise<void>;
}
