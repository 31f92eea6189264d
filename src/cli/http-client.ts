import { IdmintError, type ErrorCode, ERROR_CODES } from '../core/errors.js';

/** The CLI's view of a running server: base URL and admin token from flags or the environment. */
export interface ServerTarget {
  url: string;
  /** The admin token (the /v1/biz routes). */
  token?: string;
  /** A tag's token (the ID routes of a tag with tokens), sent as X-Idmint-Token. */
  tagToken?: string;
}

export function targetFrom(options: { url?: string; token?: string }, env: NodeJS.ProcessEnv = process.env): ServerTarget {
  const url = options.url ?? env.IDMINT_URL ?? `http://127.0.0.1:${env.IDMINT_PORT ?? '8080'}`;
  const token = options.token ?? env.IDMINT_ADMIN_TOKEN;
  return token === undefined || token === '' ? { url } : { url, token };
}

/** Calls the server; a server error becomes the same IdmintError the server raised. */
export async function call<T>(target: ServerTarget, method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {};
  if (target.token) headers.authorization = `Bearer ${target.token}`;
  if (target.tagToken) headers['x-idmint-token'] = target.tagToken;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let response: Response;
  try {
    response = await fetch(new URL(path, target.url), { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  } catch (err) {
    throw new IdmintError(
      'NOT_READY',
      `cannot reach idmint at ${target.url} (${(err as Error).cause ?? (err as Error).message}); start it with \`npm start\` or pass --url`,
      { cause: err },
    );
  }
  const text = await response.text();
  if (response.status === 204) return undefined as T;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    if (response.ok) return text as T;
    throw new IdmintError('NOT_READY', `unexpected ${response.status} answer from ${target.url}: ${text.slice(0, 200)}`);
  }
  if (!response.ok) {
    const error = (parsed as { error?: { code?: string; message?: string } }).error;
    const code = (error?.code && error.code in ERROR_CODES ? error.code : 'NOT_READY') as ErrorCode;
    const message = error?.message ?? text;
    throw new IdmintError(code, `${message}${code === 'UNAUTHORIZED' ? unauthorizedHint(path, message) : ''}`);
  }
  return parsed as T;
}

/** Which secret the server wants, by the route and its answer: the admin token, a tag token or the gate pass. */
function unauthorizedHint(path: string, message: string): string {
  if (path.startsWith('/v1/biz')) return ' (set IDMINT_ADMIN_TOKEN or pass --token)';
  if (/gatePass/i.test(message)) return ' (set IDMINT_GATE_PASS or pass --gate-pass)';
  return " (pass the tag's token with --token or set IDMINT_TAG_TOKEN; an admin creates one with `idmint biz token create <bizTag>`)";
}
