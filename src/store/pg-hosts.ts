import { ConfigError } from '../core/errors.js';

/** libpq's `target_session_attrs`, as far as idmint uses it. */
export type TargetSessionAttrs = 'any' | 'read-write' | 'primary';

export interface PostgresHosts {
  /** One single-host URL per host, in the order given, without `target_session_attrs`. */
  readonly urls: readonly string[];
  /** `host:port` of each, for logs and errors. */
  readonly names: readonly string[];
  /** What a host must be to be used: several hosts default to `read-write` (idmint writes). */
  readonly targetSessionAttrs: TargetSessionAttrs;
}

const URL_PARTS = /^(postgres(?:ql)?:\/\/)([^@/?#]*@)?([^/?#]*)(.*)$/;
const ATTRS: readonly string[] = ['any', 'read-write', 'primary'];

/**
 * Splits a libpq multi-host URL (`postgres://u:p@h1:5432,h2:5432/db?target_session_attrs=read-write`),
 * which node-postgres does not implement (brianc/node-postgres#1470), into one URL per host.
 * A single-host URL comes back as itself.
 */
export function splitPostgresUrl(url: string): PostgresHosts {
  const m = URL_PARTS.exec(url.trim());
  if (!m) throw new ConfigError('DATABASE_URL must be postgres://[user[:password]@]host[:port][,host[:port]...]/database[?...]', 'DATABASE_URL');
  const [, scheme, userinfo = '', hostList = '', rest = ''] = m as unknown as [string, string, string | undefined, string | undefined, string | undefined];
  const hosts = hostList.split(',').map((h) => h.trim());
  if (hosts.some((h) => h === '')) throw new ConfigError(`DATABASE_URL has an empty host in "${hostList}"`, 'DATABASE_URL');
  const [path = '', query] = rest.split(/\?(.*)/s, 2) as [string, string | undefined];
  const params = new URLSearchParams(query ?? '');
  const asked = params.get('target_session_attrs');
  if (asked !== null && !ATTRS.includes(asked)) {
    throw new ConfigError(`DATABASE_URL: target_session_attrs must be one of ${ATTRS.join(', ')}, got "${asked}"`, 'DATABASE_URL');
  }
  params.delete('target_session_attrs');
  const search = params.toString();
  const urls = hosts.map((h) => `${scheme}${userinfo}${h}${path}${search ? `?${search}` : ''}`);
  for (const u of urls) {
    try {
      new URL(u);
    } catch {
      throw new ConfigError(`DATABASE_URL: "${hostName(u)}" is not a host[:port]`, 'DATABASE_URL');
    }
  }
  const targetSessionAttrs = (asked ?? (hosts.length > 1 ? 'read-write' : 'any')) as TargetSessionAttrs;
  return { urls, names: hosts, targetSessionAttrs };
}

function hostName(url: string): string {
  return URL_PARTS.exec(url)?.[3] ?? url;
}
