import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Pool blocks are signed: anyone who can produce to `idmint.ids.<tag>` could otherwise make every
 * SDK consumer hand out IDs of their choosing (a block produced twice hands out its IDs twice).
 * The refill signs each block with a key it shares with the consumers (IDMINT_POOL_BLOCK_KEY /
 * the SDK's `blockKey`); consumers holding the key drop unsigned and badly signed blocks. The
 * signature covers tag, shard, start and end, so a block cannot be moved to another tag or
 * shard or widened; a replayed copy of a genuine block is what the topic ACLs must prevent
 * (docs/client.md: only the refill's principal may write pool topics).
 */
export function signPoolBlock(key: string, bizTag: string, shard: number, start: number | bigint | string, end: number | bigint | string): string {
  return createHmac('sha256', key).update(`idmint-pool-block/v1\n${bizTag}\n${shard}\n${String(start)}\n${String(end)}`).digest('hex');
}

/** Whether `sig` is the key's signature of the block (constant-time compare). */
export function verifyPoolBlock(key: string, block: { bizTag: string; shard?: number | undefined; start: string; end: string; sig?: string | undefined }): boolean {
  if (block.sig === undefined) return false;
  const expected = Buffer.from(signPoolBlock(key, block.bizTag, block.shard ?? 0, block.start, block.end), 'hex');
  const given = Buffer.from(block.sig, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}
