import { IdmintError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { ChangeFeed } from '../core/ports.js';
import type { DeploymentWatch } from '../deployment/watch.js';
import { generateSigningKey, parseSigningKey, parseVerifyKeys, type SigningKey } from '../kafka/signing.js';
import { SIGNING_KEYS_SETTING, type PostgresDeploymentRecord } from '../store/deployment-record.js';
import type { Closers } from './closers.js';

/**
 * The deployment's signing keys as the record holds them (`signing-keys`, a secret row): the
 * current key signs; a `next` key is published (consumers accept it) before it signs; a `previous`
 * key stays accepted until retired, so blocks it signed are still served. The public halves are
 * what `idmint keys public` prints. With IDMINT_SIGNING_KEY a process signs with its own key
 * instead, and only the public halves are recorded.
 */
export interface SigningKeys {
  current: KeyEntry;
  next?: KeyEntry | undefined;
  previous?: KeyEntry | undefined;
}

export interface KeyEntry {
  /** `ed25519:<kid>:<base64url>`. */
  public: string;
  /** `ed25519-secret:<base64url>`; absent when the key is an operator's IDMINT_SIGNING_KEY. */
  secret?: string | undefined;
}

export function parseSigningKeys(text: string | undefined): SigningKeys | undefined {
  if (text === undefined) return undefined;
  try {
    const keys = JSON.parse(text) as SigningKeys;
    // Checked by parsing: a row edited by hand into something else is no key at all.
    for (const entry of [keys.current, keys.next, keys.previous]) if (entry) parseVerifyKeys(entry.public, SIGNING_KEYS_SETTING);
    return keys;
  } catch {
    return undefined;
  }
}

/** The public keys consumers must accept, current first. */
export function publicKeys(keys: SigningKeys): string[] {
  return [keys.current, keys.next, keys.previous].filter((e): e is KeyEntry => e !== undefined).map((e) => e.public);
}

export function entryOf(key: SigningKey, withSecret: boolean): KeyEntry {
  return withSecret ? { public: key.publicKey, secret: key.secretKey } : { public: key.publicKey };
}

export function kidOfEntry(entry: KeyEntry): string {
  return entry.public.split(':')[1]!;
}

/**
 * The deployment's keys, recorded by the first process that signs: IDMINT_SIGNING_KEY's public half,
 * or a key generated into the record. Returns the current key's id (for the record's
 * `signing-key-id`).
 */
export async function ensureSigningKeys(record: PostgresDeploymentRecord, envKey: SigningKey | undefined): Promise<string> {
  const recorded = parseSigningKeys(await record.secret(SIGNING_KEYS_SETTING));
  if (recorded) return kidOfEntry(recorded.current);
  const key = envKey ?? generateSigningKey();
  const claimed = parseSigningKeys(await record.claimSecret(SIGNING_KEYS_SETTING, JSON.stringify({ current: entryOf(key, envKey === undefined) })));
  if (!claimed)
    throw new IdmintError('NOT_READY', `the deployment record's ${SIGNING_KEYS_SETTING} row is not a set of keys; fix it with \`idmint keys rotate\``);
  return kidOfEntry(claimed.current);
}

export interface Signer {
  /** The key to sign with now, or undefined while this process may not sign. */
  current(): SigningKey | undefined;
  /** For /readyz: why this process cannot sign, when it cannot. */
  health(): { ok: boolean; message: string; hint: string } | undefined;
}

/**
 * What this process signs with: IDMINT_SIGNING_KEY while it agrees with the record (the watch
 * closes `signing` otherwise), else the record's current key, read again on every change pushed
 * and every few seconds, so a rotation (`idmint keys rotate --promote`) lands without a restart.
 */
export async function openSigner(
  record: PostgresDeploymentRecord,
  deps: { envKey: SigningKey | undefined; watch: DeploymentWatch; changes?: ChangeFeed | undefined; everyMs: number; logger: Logger; closers: Closers },
): Promise<Signer> {
  const { envKey, watch } = deps;
  if (envKey) {
    return {
      current: () => (watch.refusal('signing') === undefined ? envKey : undefined),
      health: () => undefined, // a difference is the watch's to report
    };
  }
  const log = deps.logger.child({ component: 'signing' });
  let key: SigningKey | undefined;
  let why: string | undefined;
  const load = async (): Promise<void> => {
    const keys = parseSigningKeys(await record.secret(SIGNING_KEYS_SETTING));
    const secret = keys?.current.secret;
    const next = secret ? parseSigningKey(secret, SIGNING_KEYS_SETTING) : undefined;
    if (next?.kid !== key?.kid)
      log.info(
        { kid: next?.kid ?? null },
        next ? "signing Kafka pool blocks and replies with the deployment's key" : 'the deployment record holds no signing key this process can use',
      );
    key = next;
    why = next
      ? undefined
      : keys
        ? "the deployment signs with an operator's IDMINT_SIGNING_KEY, and this process has none: set it as on the other processes"
        : 'the deployment record holds no signing keys';
  };
  await load();
  const reload = (): void =>
    void load().catch((err: unknown) => log.debug({ err: (err as Error).message }, 'reading the signing keys failed; the last one stands'));
  const timer = setInterval(reload, deps.everyMs);
  timer.unref();
  const unsubscribe = deps.changes?.subscribe({ change: (c) => c.table === 'idmint_setting' && reload(), reset: reload });
  deps.closers.add('signer', async () => {
    clearInterval(timer);
    unsubscribe?.();
  });
  return {
    current: () => key,
    health: () =>
      why === undefined
        ? undefined
        : {
            ok: false,
            message: why,
            hint: 'this process has no signing key the deployment accepts: Kafka pool blocks and replies are refused here (set IDMINT_SIGNING_KEY as on the other processes)',
          },
  };
}
