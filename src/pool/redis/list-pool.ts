import type { Segment } from '../../core/ports.js';
import { RedisPoolBase, type RedisPoolOptions, type Taken } from './pool-base.js';
import type { PoolKeys } from './keys.js';
import { parseTakeReply, redisFailure, runScript } from './scripts.js';

/**
 * A tag's IDs minted ahead into a Redis list (`idmint:{tag}:ids`). A take is one LPOP with a
 * count inside a script (invariant 2: the IDs are gone from Redis before the caller sees them);
 * a push appends a fresh segment in chunks. Costs ~10 bytes of Redis memory per pooled ID.
 */
export class RedisListPool extends RedisPoolBase {
  readonly kind = 'redis-list' as const;

  constructor(options: RedisPoolOptions) {
    super(options, 'redis-list-pool');
  }

  protected async takeFrom(keys: PoolKeys, count: number): Promise<Taken> {
    const { bucketSeconds, slots, fence } = this.settings;
    const raw = await runScript(this.redis, 'idmintListTake', [keys.ids, keys.meta, count, bucketSeconds, slots, fence ? '1' : '0']);
    const reply = parseTakeReply('list-take.lua', raw, count);
    return { ids: reply.values, reply };
  }

  async depth(bizTag: string, shard: number): Promise<number> {
    try {
      return await this.redis.llen(this.keys(bizTag, shard).ids);
    } catch (err) {
      throw redisFailure(`Redis (list pool of "${bizTag}")`, err);
    }
  }

  async push(segment: Segment): Promise<void> {
    const keys = this.keys(segment.bizTag, segment.shard);
    const { pushChunk, fence } = this.settings;
    let length = 0;
    let code = 0;
    try {
      for (let from = segment.start; from <= segment.end; from += pushChunk) {
        const to = Math.min(from + pushChunk - 1, segment.end);
        const ids: string[] = new Array<string>(to - from + 1);
        for (let id = from; id <= to; id++) ids[id - from] = String(id);
        const reply = (await runScript(this.pushRedis, 'idmintListPush', [keys.ids, keys.meta, fence ? '1' : '0', ...ids])) as [number, number];
        code = Math.max(code, reply[0]);
        length = reply[1];
      }
    } catch (err) {
      throw redisFailure(`Redis (pushing to list pool of "${segment.bizTag}")`, err);
    }
    this.recordPushed(segment, length, code);
  }
}
