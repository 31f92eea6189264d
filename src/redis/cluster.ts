import { Cluster, type Redis, type RedisOptions } from 'ioredis';

/**
 * An ioredis Cluster client, typed as the `Redis` every user of the pools takes. The commands,
 * `defineCommand` scripts, `multi`, `duplicate`, `status` and the `ready`/`close`/`error` events
 * they use mean the same on a Cluster: a script runs on the node that owns its first key's slot
 * (every key of a tag carries the `{tag}` hash tag, so a script's keys share that slot).
 *
 * After a primary fails, its replica is promoted by the cluster (cluster-node-timeout); the
 * client learns the new owner of the slots from a MOVED reply or from its slot refresh, every
 * second here (ioredis's default is 5 s). Meanwhile commands for those slots fail, and the pools'
 * callers fall back, as they do when a single Redis is down.
 */
export function clusterClient(nodes: Array<{ host: string; port: number }>, options: RedisOptions): Redis {
  // lazyConnect and enableOfflineQueue belong to the Cluster client itself, not to each node's connection.
  const { lazyConnect, enableOfflineQueue, ...redisOptions } = options;
  // A client that must not retry (the start's check) gives up on the whole cluster too.
  const nodeRetry = redisOptions.retryStrategy;
  const cluster = new Cluster(nodes, {
    ...(lazyConnect === undefined ? {} : { lazyConnect }),
    ...(enableOfflineQueue === undefined ? {} : { enableOfflineQueue }),
    redisOptions,
    slotsRefreshInterval: 1000,
    slotsRefreshTimeout: 2000,
    // The offline queue holds commands while no node owns their slot: the fast client fails
    // them within its commandTimeout instead (maxRetriesPerRequest counts per node).
    retryDelayOnFailover: 200,
    retryDelayOnClusterDown: 200,
    ...(nodeRetry ? { clusterRetryStrategy: (times: number) => nodeRetry(times) ?? null } : {}),
  });
  return cluster as unknown as Redis;
}

/** True for a client made by clusterClient. */
export function isCluster(redis: Redis): boolean {
  return (redis as unknown) instanceof Cluster;
}
