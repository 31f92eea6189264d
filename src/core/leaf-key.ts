import { BIZ_TAG_PATTERN } from './ports.js';

/** What Leaf accepts as a key: its `leaf_alloc.biz_tag` is a varchar(128); any printable, no spaces or `/`. */
export const LEAF_KEY_PATTERN = /^[\x21-\x2e\x30-\x7e]{1,128}$/;

const HASH_HEX = 8;
const MAX_TAG = 64;

/**
 * The idmint tag that serves a Leaf key. A key that is already a valid tag is itself; any other
 * (upper case, over 64 characters, other punctuation) becomes its lower-cased, cleaned prefix plus
 * a hash of the exact key, so `Order` and `order` stay two tags, as they are two rows in Leaf.
 * Deterministic: the Leaf routes and `idmint import leaf` agree without a mapping table.
 */
export function leafKeyToBizTag(key: string): string {
  if (BIZ_TAG_PATTERN.test(key)) return key;
  const cleaned = key
    .toLowerCase()
    .replace(/[^a-z0-9._-]/g, '-')
    .replace(/^[^a-z0-9]+/, '')
    .slice(0, MAX_TAG - HASH_HEX - 1);
  return `${cleaned || 'leaf'}-${fnv1a(key)}`;
}

/** 32-bit FNV-1a of the UTF-16 code units, as 8 hex digits. */
function fnv1a(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(16).padStart(HASH_HEX, '0');
}
