import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import { BadRequestError } from '../core/errors.js';

/**
 * Ed25519 signatures on what idmint writes to Kafka (DESIGN invariant 10): the refill signs pool
 * blocks, responders sign replies, with the deployment's signing key; SDK consumers hold only the
 * public half, so no consumer (nor anyone who can write a topic) can make a block or reply of its
 * own. What is signed binds each message to where it may appear (docs/client.md gives the bytes):
 * a block to its namespace, topic, partition, tag and shard, and to a sequence that grows along its
 * partition (a consumer takes a block only above the last one taken there); a reply to its reply
 * topic and request id.
 *
 * Keys travel as text: a public key `ed25519:<kid>:<base64url of its 32 bytes>` (what `idmint keys
 * public` prints and the SDK's `verifyKey` takes), a secret key `ed25519-secret:<base64url of the
 * 32-byte seed>` (IDMINT_SIGNING_KEY). `kid`, 16 hex digits of SHA-256 of the public key, names the
 * key in every signed message, so two keys can be valid at once during a rotation.
 */

const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
const PUBLIC = /^ed25519:([0-9a-f]{16}):([A-Za-z0-9_-]{43})$/;
const SECRET = /^ed25519-secret:([A-Za-z0-9_-]{43})$/;
/** A signature as it travels: base64url of 64 bytes. */
export const SIGNATURE_PATTERN = /^[A-Za-z0-9_-]{86}$/;
export const KID_PATTERN = /^[0-9a-f]{16}$/;

export interface SigningKey {
  readonly kid: string;
  /** `ed25519:<kid>:<base64url>`: give this to consumers. */
  readonly publicKey: string;
  /** `ed25519-secret:<base64url seed>`: never logged. */
  readonly secretKey: string;
  sign(bytes: Buffer): string;
}

/** The keys a consumer accepts, by kid. */
export interface VerifyKeys {
  readonly kids: readonly string[];
  /** The keys as given (`ed25519:<kid>:<base64url>`). */
  readonly publicKeys: readonly string[];
  /** Whether `sig` is the signature of `bytes` by the key `kid` (false for an unknown kid or a malformed signature). */
  verify(kid: string, bytes: Buffer, sig: string): boolean;
}

function kidOf(raw: Buffer): string {
  return createHash('sha256').update(raw).digest('hex').slice(0, 16);
}

function rawPublic(key: KeyObject): Buffer {
  return key.export({ format: 'der', type: 'spki' }).subarray(SPKI_PREFIX.length);
}

function fromPrivate(privateKey: KeyObject): SigningKey {
  const seed = privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(PKCS8_PREFIX.length);
  const raw = rawPublic(createPublicKey(privateKey));
  const kid = kidOf(raw);
  return Object.freeze({
    kid,
    publicKey: `ed25519:${kid}:${raw.toString('base64url')}`,
    secretKey: `ed25519-secret:${seed.toString('base64url')}`,
    sign: (bytes: Buffer) => sign(null, bytes, privateKey).toString('base64url'),
  });
}

export function generateSigningKey(): SigningKey {
  return fromPrivate(generateKeyPairSync('ed25519').privateKey);
}

/** A secret key as IDMINT_SIGNING_KEY gives it; BAD_REQUEST (naming `field`) for anything else. */
export function parseSigningKey(text: string, field = 'IDMINT_SIGNING_KEY'): SigningKey {
  const m = SECRET.exec(text.trim());
  if (!m) throw new BadRequestError(`${field} must be an Ed25519 secret key "ed25519-secret:<base64url>" (make one with \`idmint keys generate\`)`, field);
  return fromPrivate(createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, Buffer.from(m[1]!, 'base64url')]), format: 'der', type: 'pkcs8' }));
}

/**
 * Public keys as `verifyKey` or IDMINT_VERIFY_KEY give them (one, a list, or a comma- or
 * newline-separated string: two during a rotation). BAD_REQUEST naming `field` for a malformed
 * key, or a key whose kid is not its own.
 */
export function parseVerifyKeys(given: string | readonly string[], field = 'verifyKey'): VerifyKeys {
  const texts = (typeof given === 'string' ? given.split(/[\s,]+/) : given.flatMap((g) => g.split(/[\s,]+/))).filter((t) => t !== '');
  if (texts.length === 0) throw new BadRequestError(`${field} names no key: give the output of \`idmint keys public\``, field);
  const keys = new Map<string, KeyObject>();
  const publicKeys: string[] = [];
  for (const text of texts) {
    const m = PUBLIC.exec(text);
    if (!m)
      throw new BadRequestError(
        `${field}: "${text.slice(0, 24)}…" is not an idmint public key "ed25519:<kid>:<base64url>" (print the deployment's with \`idmint keys public\`)`,
        field,
      );
    const raw = Buffer.from(m[2]!, 'base64url');
    if (raw.length !== 32 || kidOf(raw) !== m[1]) throw new BadRequestError(`${field}: the key "${text.slice(0, 24)}…" does not match its key id`, field);
    keys.set(m[1]!, createPublicKey({ key: Buffer.concat([SPKI_PREFIX, raw]), format: 'der', type: 'spki' }));
    publicKeys.push(text);
  }
  return Object.freeze({
    kids: [...keys.keys()],
    publicKeys,
    verify(kid: string, bytes: Buffer, sig: string): boolean {
      const key = keys.get(kid);
      if (!key || !SIGNATURE_PATTERN.test(sig)) return false;
      return verify(null, bytes, key, Buffer.from(sig, 'base64url'));
    },
  });
}

/** Where a pool block may appear, and what it holds: every field is signed. */
export interface BlockPlace {
  /** IDMINT_KAFKA_NAMESPACE, '' for none. */
  readonly namespace: string;
  readonly topic: string;
  readonly partition: number;
  /** Grows along the partition in the order blocks are appended (its first ID, unless a block of a lower segment follows a higher one). */
  readonly seq: string;
  /** When it was signed, epoch ms: a consumer takes no block older than its maxBlockAgeMs (a copy kept for later is useless). */
  readonly at: string;
  readonly bizTag: string;
  readonly shard: number;
  readonly start: string;
  readonly end: string;
}

/** The bytes a pool block's signature covers (docs/client.md, "Signed bytes"). */
export function blockBytes(b: BlockPlace): Buffer {
  return Buffer.from(`idmint-pool-block/v2\n${b.namespace}\n${b.topic}\n${b.partition}\n${b.seq}\n${b.at}\n${b.bizTag}\n${b.shard}\n${b.start}\n${b.end}`);
}

/** What a reply says, and where it may appear: every field is signed. */
export type ReplyContent =
  | { readonly kind: 'ids'; readonly source: string; readonly format: string; readonly ids: readonly string[] }
  | { readonly kind: 'blocks'; readonly source: string; readonly blocks: ReadonlyArray<{ readonly start: string; readonly end: string }> }
  | { readonly kind: 'error'; readonly code: string; readonly message: string };

/** The bytes a reply's signature covers (docs/client.md, "Signed bytes"). */
export function replyBytes(replyTo: string, id: string, c: ReplyContent): Buffer {
  const head = `idmint-reply/v1\n${replyTo}\n${id}\n${c.kind}\n`;
  if (c.kind === 'ids') return Buffer.from(`${head}${c.source}\n${c.format}\n${c.ids.join(',')}`);
  if (c.kind === 'blocks') return Buffer.from(`${head}${c.source}\n\n${c.blocks.map((b) => `${b.start}-${b.end}`).join(',')}`);
  return Buffer.from(`${head}${c.code}\n${c.message}\n`);
}
