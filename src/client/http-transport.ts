import { BadRequestError, ERROR_CODES, IdmintError, TimeoutError } from '../core/errors.js';
import type { ErrorCode } from '../core/errors.js';
import type { Block } from '../core/block.js';
import type { IdSourceName } from '../core/ports.js';
import type { Logger } from '../core/logger.js';
import { silentLogger } from '../core/logger.js';
import type { IdTransport, TransportBatch } from './transport.js';
import { checkInteger, resolveOptions } from '../core/options.js';
import { retry } from '../core/retry.js';
import { withHttpTraceHeaders } from '../tracing/client.js';

export interface HttpTransportSettings {
  /** Per attempt: a request without an answer by then is abandoned (its IDs, if any, become gaps). */
  timeoutMs: number;
  /** Extra attempts after a retriable failure (NOT_READY, TIMEOUT, POOL_EMPTY, network errors). */
  retries: number;
  /** First backoff; doubles per attempt, with jitter, up to maxBackoffMs. */
  backoffMs: number;
  maxBackoffMs: number;
}

export const HTTP_TRANSPORT_DEFAULTS: Readonly<HttpTransportSettings> = Object.freeze({
  timeoutMs: 5000,
  /** 100+200+400+800+1600 ms: rides out a server restart of a few seconds. */
  retries: 5,
  backoffMs: 100,
  maxBackoffMs: 2000,
});

export interface HttpTransportOptions extends Partial<HttpTransportSettings> {
  /** Base URL of an idmint server, e.g. `http://127.0.0.1:8080`. */
  url: string;
  /** Tinyid's token, when the server sets IDMINT_GATE_PASS. */
  gatePass?: string;
  /** A tag token (`idmint biz token create`), sent with every tag's requests as X-Idmint-Token. */
  token?: string;
  /** Tokens per tag, over `token` for the tags listed. */
  tokens?: Readonly<Record<string, string>>;
  logger?: Logger;
}

export interface HttpTransport extends IdTransport {
  /** Attempts that failed and were retried, since creation. */
  readonly retried: number;
}

const ACCEPT_JSON = Object.freeze({ accept: 'application/json' });

const SOURCES: ReadonlySet<string> = new Set<IdSourceName>(['pool', 'segment', 'snowflake']);

/**
 * `GET /v1/ids/:bizTag?count=N` over Node's global fetch, whose undici agent keeps
 * connections alive. An error body `{"error":{"code","message"}}` becomes the same IdmintError.
 */
export function httpTransport(options: HttpTransportOptions): HttpTransport {
  const s = validate(options);
  const base = parseBase(options.url);
  const logger = (options.logger ?? silentLogger).child({ component: 'client-http' });
  // Aborts requests and backoffs in flight when the transport closes.
  const closer = new AbortController();
  let retried = 0;

  async function attempt(bizTag: string, count: number, route: 'ids' | 'blocks' = 'ids'): Promise<TransportBatch> {
    const url = new URL(`v1/${route}/${encodeURIComponent(bizTag)}`, base);
    url.searchParams.set('count', String(count));
    if (options.gatePass !== undefined) url.searchParams.set('gatePass', options.gatePass);
    const signal = AbortSignal.any([closer.signal, AbortSignal.timeout(s.timeoutMs)]);
    let response: Response;
    let text: string;
    try {
      const token = options.tokens?.[bizTag] ?? options.token;
      response = await fetch(url, { signal, headers: withHttpTraceHeaders(token === undefined ? ACCEPT_JSON : { ...ACCEPT_JSON, 'x-idmint-token': token }) });
      text = await response.text();
    } catch (err) {
      if (closer.signal.aborted) throw closedError(err);
      if (signal.aborted) throw new TimeoutError(`GET ${url.pathname}`, s.timeoutMs, err);
      const reason = err instanceof Error ? String((err.cause as Error | undefined)?.message ?? err.message) : String(err);
      throw new IdmintError('NOT_READY', `cannot reach idmint at ${base.origin}: ${reason}`, { cause: err });
    }
    return decode(response.status, text, base.origin);
  }

  function withRetries(bizTag: string, count: number, route: 'ids' | 'blocks'): Promise<TransportBatch> {
    return retry(() => attempt(bizTag, count, route), {
      what: `GET /v1/${route}/${bizTag}`,
      retriable: (err) => err instanceof IdmintError && err.retriable,
      attempts: s.retries + 1,
      initialMs: s.backoffMs,
      maxMs: s.maxBackoffMs,
      jitter: 0.5,
      signal: closer.signal,
      onRetry: ({ err, attempt: n, waitMs }) => {
        retried++;
        logger.debug({ bizTag, attempt: n, code: (err as IdmintError).code, delay: waitMs }, 'ID request failed; retrying');
      },
    });
  }

  return {
    get retried() {
      return retried;
    },
    fetch: (bizTag, count) => withRetries(bizTag, count, 'ids'),
    fetchBlocks: (bizTag, count) => withRetries(bizTag, count, 'blocks'),
    async close() {
      closer.abort(closedError());
    },
  };
}

function decode(status: number, text: string, origin: string): TransportBatch {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new IdmintError('NOT_READY', `idmint at ${origin} answered ${status} with a non-JSON body: ${text.slice(0, 200)}`, { retriable: status >= 500 });
  }
  if (status < 200 || status > 299) {
    const error = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
    const code = typeof error?.code === 'string' && error.code in ERROR_CODES ? (error.code as ErrorCode) : undefined;
    const message = typeof error?.message === 'string' ? error.message : text.slice(0, 200);
    if (code) throw new IdmintError(code, message, { details: { status } });
    throw new IdmintError('NOT_READY', `idmint at ${origin} answered ${status}: ${message}`, { retriable: status >= 500, details: { status } });
  }
  const { ids, blocks, source, format } = (body ?? {}) as { ids?: unknown; blocks?: unknown; source?: unknown; format?: unknown };
  const from = typeof source === 'string' && SOURCES.has(source) ? (source as IdSourceName) : 'unknown';
  if (Array.isArray(blocks)) return { blocks: parseBlocks(blocks, origin), source: from };
  if (!Array.isArray(ids)) throw new IdmintError('NOT_READY', `idmint at ${origin} answered without an ids array`, { retriable: false });
  return { ids: ids as string[], source: from, ...(typeof format === 'string' ? { format } : {}) };
}

const SEGMENT_ID = /^[1-9][0-9]{0,15}$/;

/** Blocks of segment IDs: decimal strings below 2^53, start ≤ end; anything else is refused. */
function parseBlocks(raw: unknown[], origin: string): Block[] {
  return raw.map((b) => {
    const { start, end } = (b ?? {}) as { start?: unknown; end?: unknown };
    const ok = typeof start === 'string' && typeof end === 'string' && SEGMENT_ID.test(start) && SEGMENT_ID.test(end);
    const block = ok ? { start: Number(start), end: Number(end) } : undefined;
    if (!block || !Number.isSafeInteger(block.end) || block.start > block.end) {
      throw new IdmintError('NOT_READY', `idmint at ${origin} answered a malformed block: ${JSON.stringify(b)}`, { retriable: false });
    }
    return block;
  });
}

function closedError(cause?: unknown): IdmintError {
  return new IdmintError('NOT_READY', 'the HTTP transport is closed', { cause, retriable: false });
}

function parseBase(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new BadRequestError(`httpTransport url must be an absolute http(s) URL, got ${JSON.stringify(raw)}`, 'url');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new BadRequestError(`httpTransport url must be http or https, got ${url.protocol}`, 'url');
  // A trailing slash makes `v1/ids/...` resolve under a path prefix such as a proxy's /idmint/.
  if (!url.pathname.endsWith('/')) url.pathname += '/';
  return url;
}

function validate(options: HttpTransportOptions): Readonly<HttpTransportSettings> {
  const keys = Object.keys(HTTP_TRANSPORT_DEFAULTS) as (keyof HttpTransportSettings)[];
  const given = Object.fromEntries(keys.map((key) => [key, options[key]])) as Partial<HttpTransportSettings>;
  return resolveOptions<HttpTransportSettings>(HTTP_TRANSPORT_DEFAULTS, given, (s) => {
    for (const key of keys) checkInteger('httpTransport', s, key, key === 'retries' ? 0 : 1);
  });
}

/** The secrets an HTTP transport sends: the gate pass and tag tokens, where given. */
export function secretsOf(options: {
  gatePass?: string | undefined;
  token?: string | undefined;
  tokens?: Readonly<Record<string, string>> | undefined;
}): Pick<HttpTransportOptions, 'gatePass' | 'token' | 'tokens'> {
  return {
    ...(options.gatePass === undefined ? {} : { gatePass: options.gatePass }),
    ...(options.token === undefined ? {} : { token: options.token }),
    ...(options.tokens === undefined ? {} : { tokens: options.tokens }),
  };
}
