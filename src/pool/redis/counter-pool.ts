import { appendRange, type Block } from '../../core/block.js';
import type { BizTag, Segment, TakeContext } from '../../core/ports.js';
import { RedisPoolBase, type RedisPoolOptions, type Taken } from './pool-base.js';
import type { PoolKeys } from './keys.js';
import { parseTakeReply, redisFailure, runScript } from './scripts.js';

/**
 * A counter pool with no per-ID memory: a hash `{cur, last, queued}` plus a list of queued
 * ranges "start-end". Segments of one tag are not contiguous (refills interleave), so a fresh
 * segment is queued as its own range rather than stretching `last`.
 */
export class RedisCounterPool extends RedisPoolBase {
  readonly kind = 'redis-counter' as const;

  constructor(options: RedisPoolOptions) {
    super(options, 'redis-counter-pool');
  }

  protected async takeFrom(keys: PoolKeys, count: number): Promise<Taken> {
    const { bucketSeconds, slots, fence } = this.settings;
    const raw = await runScript(this.redis, 'idmintCounterTake', [keys.counter, keys.ranges, keys.meta, count, bucketSeconds, slots, fence ? '1' : '0']);
    const reply = parseTakeReply('counter-take.lua', raw, count);
    const blocks: Block[] = [];
    for (let i = 0; i + 1 < reply.values.length; i += 2) appendRange(blocks, Number(reply.values[i]), Number(reply.values[i + 1]));
    return { blocks, reply };
  }

  /** The pool's ranges as they are: a `GET /v1/blocks` answer costs no per-ID work. */
  async takeBlocks(tag: BizTag, count: number, context: TakeContext = {}): Promise<Block[]> {
    return (await this.takeTaken(tag, count, context)).blocks ?? [];
  }

  async depth(bizTag: string, shard: number): Promise<number> {
    try {
      const [cur, last, queued] = await this.redis.hmget(this.keys(bizTag, shard).counter, 'cur', 'last', 'queued');
      const c = Number(cur ?? 1);
      const l = Number(last ?? 0);
      return Number(queued ?? 0) + (c <= l ? l - c + 1 : 0);
    } catch (err) {
      throw redisFailure(`Redis (counter pool of "${bizTag}")`, err);
    }
  }

  async push(segment: Segment): Promise<void> {
    const keys = this.keys(segment.bizTag, segment.shard);
    let reply: [number, number];
    try {
      reply = (await runScript(this.pushRedis, 'idmintCounterPush', [
        keys.counter,
        keys.ranges,
        keys.meta,
        this.settings.fence ? '1' : '0',
        String(segment.start),
        String(segment.end),
      ])) as [number, number];
    } catch (err) {
      throw redisFailure(`Redis (pushing to counter pool of "${segment.bizTag}")`, err);
    }
    this.recordPushed(segment, reply[1], reply[0]);
  }
}
