import type { Redis } from 'ioredis';
import { readLua as readPoolLua } from '../../redis/lua.js';
import { BadRequestError, IdmintError, notReady } from '../../core/errors.js';

/**
 * The pool Lua scripts, loaded from src/pool/redis/lua with ioredis `defineCommand` (EVALSHA, falling
 * back to EVAL once per connection). `fence.lua` is a shared prologue prepended to each.
 */

const readLua = (name: string): string => readPoolLua(import.meta.url, 'pool/redis', name);

const SCRIPTS = {
  idmintListTake: { file: 'list-take.lua', keys: 2 },
  idmintListPush: { file: 'list-push.lua', keys: 2 },
  idmintCounterTake: { file: 'counter-take.lua', keys: 3 },
  idmintCounterPush: { file: 'counter-push.lua', keys: 3 },
  idmintDemandRecord: { file: 'demand-record.lua', keys: 1 },
} as const;

type ScriptName = keyof typeof SCRIPTS;
type ScriptFn = (...args: (string | number)[]) => Promise<unknown>;

let sources: Record<ScriptName, string> | undefined;

function scriptSources(): Record<ScriptName, string> {
  if (!sources) {
    const prologue = readLua('fence.lua');
    sources = Object.fromEntries(Object.entries(SCRIPTS).map(([name, s]) => [name, `${prologue}\n${readLua(s.file)}`])) as Record<ScriptName, string>;
  }
  return sources;
}

/** Defines every pool script on a client at once (the connection owner does this when it opens). */
export function defineScripts(redis: Redis): void {
  for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
    redis.defineCommand(name, { numberOfKeys: SCRIPTS[name].keys, lua: scriptSources()[name] });
  }
}

/** Calls one pool script on `redis`, defining it on first use. */
export async function runScript(redis: Redis, name: ScriptName, args: (string | number)[]): Promise<unknown> {
  const client = redis as unknown as Record<string, ScriptFn | undefined>;
  if (typeof client[name] !== 'function') {
    redis.defineCommand(name, { numberOfKeys: SCRIPTS[name].keys, lua: scriptSources()[name] });
  }
  return (client[name] as ScriptFn).call(redis, ...args);
}

/** What every take script returns, typed. */
export interface TakeReply {
  /** 0 served, 1 a stale pool was dropped. */
  readonly code: 0 | 1;
  readonly remaining: number;
  /** The last target depth the refill processor set; -1 when none. */
  readonly target: number;
  readonly values: string[];
}

/**
 * The one place script return codes become typed errors: negative codes are the caller's
 * mistakes, anything malformed means the script and this code disagree.
 */
export function parseTakeReply(script: string, reply: unknown, count: number): TakeReply {
  if (!Array.isArray(reply) || reply.length !== 4) {
    throw new IdmintError('NOT_READY', `${script} returned an unexpected reply`, { details: { reply } });
  }
  const [code, remaining, target, values] = reply as [number, number, number, unknown];
  if (code === -1) throw new BadRequestError(`count must be a positive integer, got ${count}`, 'count');
  if ((code !== 0 && code !== 1) || !Array.isArray(values)) {
    throw new IdmintError('NOT_READY', `${script} returned code ${String(code)}`, { details: { reply } });
  }
  return { code, remaining: Number(remaining), target: Number(target), values: values as string[] };
}

/** Redis failures (connection lost, timeouts) become NOT_READY so the dispenser falls back. */
export function redisFailure(what: string, err: unknown): IdmintError {
  return err instanceof IdmintError ? err : notReady(what, err, 'redis');
}
