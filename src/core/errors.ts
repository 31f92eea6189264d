/**
 * One error root for idmint. Every failure a caller can see carries a stable `code`
 * (documented in README.md; a unit test keeps the two in step), whether a retry may help,
 * the HTTP status it maps to, and the facts that explain it.
 */
import type { Dependency } from './dependency.js';

export const ERROR_CODES = {
  UNKNOWN_BIZ_TAG: { status: 404, retriable: false, summary: 'No business tag of that name exists (or it was deleted).' },
  BIZ_TAG_EXISTS: { status: 409, retriable: false, summary: 'A business tag of that name already exists.' },
  BAD_REQUEST: { status: 400, retriable: false, summary: 'A parameter, field or message is malformed; the message names it.' },
  POOL_EMPTY: { status: 503, retriable: true, summary: "The pool ran dry and the tag's fallback policy is `error`." },
  SEGMENT_EXHAUSTED: { status: 409, retriable: false, summary: 'The tag reached its `max_limit`; no further IDs will be issued.' },
  CLOCK_BACKWARDS: { status: 503, retriable: true, summary: 'The clock moved back beyond what can be waited out.' },
  WORKER_ID_UNAVAILABLE: { status: 503, retriable: false, summary: 'No worker id could be obtained that fits the layout.' },
  NOT_READY: { status: 503, retriable: true, summary: 'A backing server is unreachable or the process is starting or stopping.' },
  UNAUTHORIZED: { status: 401, retriable: false, summary: 'The admin token is missing or wrong.' },
  RATE_LIMITED: { status: 429, retriable: true, summary: 'Too many requests from this client or for this tag; retry after the time the message gives.' },
  TIMEOUT: { status: 504, retriable: true, summary: 'No answer arrived before the deadline.' },
  // The operator's to fix, not a caller's: never in an answer (see forCaller), its status only what a caller gets instead.
  CONFIG_INVALID: {
    status: 503,
    retriable: false,
    summary: 'A setting or option is invalid; the process refuses to start and the message says what to change. Never sent to a caller.',
  },
} as const satisfies Record<string, { status: number; retriable: boolean; summary: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface IdmintErrorOptions {
  cause?: unknown;
  /** Facts that explain the failure; serialised into logs, never into HTTP bodies wholesale. */
  details?: Record<string, unknown>;
  /** Overrides the code's default. */
  retriable?: boolean;
}

export class IdmintError extends Error {
  readonly code: ErrorCode;
  readonly retriable: boolean;
  readonly details: Readonly<Record<string, unknown>>;

  constructor(code: ErrorCode, message: string, options: IdmintErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'IdmintError';
    this.code = code;
    this.retriable = options.retriable ?? ERROR_CODES[code].retriable;
    this.details = Object.freeze({ ...(options.details ?? {}) });
  }

  /** The HTTP status this error maps to. */
  get status(): number {
    return ERROR_CODES[this.code].status;
  }

  /** The public JSON shape: `{"error":{"code","message"}}`. */
  toJSON(): { error: { code: ErrorCode; message: string } } {
    return { error: { code: this.code, message: this.message } };
  }
}

export class ClockBackwardsError extends IdmintError {
  readonly lastMs: number;
  readonly nowMs: number;

  constructor(lastMs: number, nowMs: number, message?: string) {
    super(
      'CLOCK_BACKWARDS',
      message ??
        `clock moved backwards by ${lastMs - nowMs} ms (last issued at ${new Date(lastMs).toISOString()}, now ${new Date(nowMs).toISOString()}); refusing to issue IDs until it catches up`,
      { details: { lastMs, nowMs, offsetMs: lastMs - nowMs } },
    );
    this.name = 'ClockBackwardsError';
    this.lastMs = lastMs;
    this.nowMs = nowMs;
  }
}

export class SegmentExhaustedError extends IdmintError {
  readonly bizTag: string;
  readonly maxLimit: number;

  /** `remaining`: IDs still left under max_limit, when a request asked for more than that (none were consumed). */
  constructor(bizTag: string, maxLimit: number, remaining = 0) {
    super(
      'SEGMENT_EXHAUSTED',
      remaining > 0
        ? `biz tag "${bizTag}" has only ${remaining} IDs left under its max_limit ${maxLimit}; ask for at most ${remaining} (none were consumed), or raise maxLimit`
        : `biz tag "${bizTag}" reached its max_limit ${maxLimit}; no further IDs can be issued (raise maxLimit or create a new tag)`,
      { details: remaining > 0 ? { bizTag, maxLimit, remaining } : { bizTag, maxLimit } },
    );
    this.name = 'SegmentExhaustedError';
    this.bizTag = bizTag;
    this.maxLimit = maxLimit;
  }
}

export class UnknownBizTagError extends IdmintError {
  readonly bizTag: string;

  constructor(bizTag: string) {
    super('UNKNOWN_BIZ_TAG', `unknown biz tag "${bizTag}": create it with POST /v1/biz or \`idmint biz create ${bizTag}\``, {
      details: { bizTag },
    });
    this.name = 'UnknownBizTagError';
    this.bizTag = bizTag;
  }
}

export class BadRequestError extends IdmintError {
  /** The field, parameter or message part at fault. */
  readonly field: string | undefined;

  constructor(message: string, field?: string) {
    super('BAD_REQUEST', message, { details: field === undefined ? {} : { field } });
    this.name = 'BadRequestError';
    this.field = field;
  }
}

/**
 * A setting or constructor option that cannot work: the operator's or programmer's mistake, found
 * at start (or construction), never a caller's. The message names the setting and what to change.
 */
export class ConfigError extends IdmintError {
  /** The setting or option at fault. */
  readonly field: string | undefined;

  constructor(message: string, field?: string, options: IdmintErrorOptions = {}) {
    super('CONFIG_INVALID', message, { ...options, details: { ...(field === undefined ? {} : { field }), ...(options.details ?? {}) } });
    this.name = 'ConfigError';
    this.field = field;
  }
}

export class TimeoutError extends IdmintError {
  readonly timeoutMs: number;

  /** `dependency`: the server that did not answer, when one did not (core/episode.ts). */
  constructor(what: string, timeoutMs: number, cause?: unknown, dependency?: Dependency) {
    super('TIMEOUT', `${what} did not complete within ${timeoutMs} ms`, { cause, details: { timeoutMs, ...(dependency ? { dependency } : {}) } });
    this.name = 'TimeoutError';
    this.timeoutMs = timeoutMs;
  }
}

export function isIdmintError(err: unknown): err is IdmintError {
  return err instanceof IdmintError;
}

/**
 * What a caller (an HTTP or Kafka request) may be told of a failure: an IdmintError as it is;
 * anything else (a bug) and a CONFIG_INVALID (the operator's to fix, and its message may name
 * settings) become the internal fault, NOT_READY, whose message points to the log. The caller
 * logs the original (`cause`) when the two differ.
 */
export function forCaller(err: unknown, what = 'internal fault'): IdmintError {
  if (isIdmintError(err) && err.code !== 'CONFIG_INVALID') return err;
  return new IdmintError('NOT_READY', `${what}; the server logged the details`, { cause: err });
}

/** Wraps an unknown failure of a backing server as NOT_READY, keeping the cause. */
export function notReady(what: string, cause: unknown, dependency?: Dependency): IdmintError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new IdmintError('NOT_READY', `${what} is unavailable: ${reason}`, { cause, ...(dependency ? { details: { dependency } } : {}) });
}

/**
 * The server whose outage an error reports, when it says so (`details.dependency`, or the older
 * `zkUnreachable` / `pgUnreachable` marks), looking through `cause` too: an episode logging it
 * joins that server's outage (core/episode.ts).
 */
export function dependencyOf(err: unknown): Dependency | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    if (!(e instanceof IdmintError)) continue;
    const d = e.details;
    if (d.dependency === 'postgres' || d.dependency === 'redis' || d.dependency === 'zookeeper' || d.dependency === 'kafka') return d.dependency;
    if (d.zkUnreachable === true) return 'zookeeper';
    if (d.pgUnreachable === true) return 'postgres';
  }
  return undefined;
}
