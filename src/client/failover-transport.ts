import { BadRequestError, IdmintError, isIdmintError } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { retry } from '../core/retry.js';
import { httpTransport, secretsOf, type HttpTransport } from './http-transport.js';
import type { IdTransport, TransportBatch } from './transport.js';

export interface FailoverTransportOptions {
  /** Base URLs of idmint servers sharing one database: fetches are spread across them. */
  urls: readonly string[];
  /** How long a server that failed is left out before it is tried again. Default 5000 ms. */
  cooldownMs?: number;
  /** Per request to one server. Default 3000 ms. */
  timeoutMs?: number;
  /** Rounds over every server before giving up, with a backoff between rounds. Default 5. */
  rounds?: number;
  gatePass?: string;
  /** A tag token for every tag, and tokens per tag (see httpTransport). */
  token?: string;
  tokens?: Readonly<Record<string, string>>;
  logger?: Logger;
}

interface Endpoint {
  readonly url: string;
  readonly transport: HttpTransport;
  downUntil: number;
}

/**
 * Several servers behind one transport (Tinyid's client has one: its issue #42). Fetches go
 * round-robin to the servers that are up; a server that fails with a retriable error (down,
 * timing out, not ready) is left out for `cooldownMs` and the fetch moves to the next one, so
 * callers see no error while one server answers. A caller's mistake (unknown tag, bad count)
 * is not a server failure and is returned at once. IDs a failed request may have taken are
 * gaps, never repeats: every server draws from the same counters.
 */
export function failoverTransport(options: FailoverTransportOptions): IdTransport {
  if (!Array.isArray(options.urls) || options.urls.length === 0) throw new BadRequestError('failoverTransport needs at least one URL in `urls`', 'urls');
  const cooldownMs = options.cooldownMs ?? 5000;
  const rounds = options.rounds ?? 5;
  const logger = (options.logger ?? silentLogger).child({ component: 'client-failover' });
  const endpoints: Endpoint[] = options.urls.map((url) => ({
    url,
    downUntil: 0,
    transport: httpTransport({
      url,
      retries: 0,
      timeoutMs: options.timeoutMs ?? 3000,
      ...secretsOf(options),
      ...(options.logger ? { logger: options.logger } : {}),
    }),
  }));
  let turn = 0;
  const closer = new AbortController();

  /** One round over the servers: the first answer, or the last retriable failure. */
  async function round(fetchOne: (e: Endpoint) => Promise<TransportBatch>): Promise<TransportBatch> {
    let last: IdmintError | undefined;
    const now = Date.now();
    // Servers that are up first, in turn; the ones cooling down only when none is up.
    const order = endpoints.map((_, i) => endpoints[(turn + i) % endpoints.length]!);
    turn = (turn + 1) % endpoints.length;
    const up = order.filter((e) => e.downUntil <= now);
    for (const endpoint of up.length > 0 ? up : order) {
      if (closer.signal.aborted) throw closer.signal.reason;
      try {
        const batch = await fetchOne(endpoint);
        endpoint.downUntil = 0;
        return batch;
      } catch (err) {
        if (!isIdmintError(err) || !err.retriable) throw err;
        last = err;
        endpoint.downUntil = Date.now() + cooldownMs;
        logger.debug({ url: endpoint.url, code: err.code }, 'server failed; trying the next one');
      }
    }
    throw last ?? new IdmintError('NOT_READY', 'no idmint server answered');
  }

  async function call(fetchOne: (e: Endpoint) => Promise<TransportBatch>): Promise<TransportBatch> {
    if (rounds < 1) throw new IdmintError('NOT_READY', 'no idmint server answered');
    return retry(() => round(fetchOne), {
      what: 'a request to the idmint servers',
      retriable: (err) => isIdmintError(err) && err.retriable,
      attempts: rounds,
      initialMs: 100,
      maxMs: 2000,
      signal: closer.signal,
    });
  }

  return {
    fetch: (bizTag, count) => call((e) => e.transport.fetch(bizTag, count)),
    fetchBlocks: (bizTag, count) => call((e) => e.transport.fetchBlocks!(bizTag, count)),
    async close() {
      closer.abort(new IdmintError('NOT_READY', 'the failover transport is closed', { retriable: false }));
      await Promise.all(endpoints.map((e) => e.transport.close()));
    },
  };
}
