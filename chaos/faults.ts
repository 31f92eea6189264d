import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { REQUEST_TOPIC } from '../src/kafka/names.js';
import { ROLES, type Topology, type RoleName, type TopologyKind } from './topology.js';

/**
 * The faults, each a function that injects it and returns once the topology is whole again.
 */
export interface Fault {
  readonly kind: string;
  readonly what: string;
  inject(t: Topology, rng: () => number): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pick = <T>(list: readonly T[], rng: () => number): T => list[Math.floor(rng() * list.length)]!;

function killRole(kind: 'api' | 'responder' | 'refill'): Fault {
  return {
    kind: `kill-${kind}`,
    what: `SIGKILL one ${kind} process, start it again a second later`,
    async inject(t, rng) {
      const role = pick([`${kind}-1`, `${kind}-2`] as RoleName[], rng);
      await t.killRole(role);
      await sleep(1000);
      await t.startRole(role);
    },
  };
}

function clockBack(stepMs: number, holdMs: number, what: string): Fault {
  return {
    kind: `clock-back-${stepMs >= 1000 ? `${stepMs / 1000}s` : `${stepMs}ms`}`,
    what,
    async inject(t, rng) {
      const role = pick(['api-1', 'api-2'] as RoleName[], rng);
      t.setClockOffset(role, -stepMs);
      await sleep(holdMs);
      t.setClockOffset(role, 0);
    },
  };
}

function patroniFailover(lostTail: boolean): Fault {
  return {
    kind: lostTail ? 'postgres-lost-tail' : 'postgres-failover',
    what: lostTail
      ? "freeze the Patroni leader's WAL senders for 4 s under load, SIGKILL it: the promoted replica lacks its last segments (the fence's case); the old leader rejoins, re-cloned"
      : 'SIGKILL the Patroni leader (Postgres and Patroni), wait for a replica to be promoted, start it again as a replica',
    async inject(t) {
      const ha = t.pgHa!;
      await ha.whole(); // after a ZooKeeper fault Patroni may still be electing
      const leader = await ha.leader();
      if (leader === '') throw new Error('the Patroni cluster has no leader');
      if (lostTail) {
        await ha.freeze(leader);
        await sleep(4000);
      }
      await ha.kill(leader);
      await ha.promotedAfter(leader);
      await ha.start(leader);
      await ha.whole();
    },
  };
}

/** The replicated servers' faults (`ha`): one server of each kind lost or hung, the others serving. */
const REPLICATED_FAULTS: readonly Fault[] = [
  {
    kind: 'redis-master-hang',
    what: 'SIGSTOP the Redis master until the Sentinels promote a replica, resume it (a stale master until they demote it)',
    async inject(t) {
      const set = t.sentinels!;
      await set.untilPromotable();
      const paused = await set.pauseMaster();
      paused.resume();
      await set.untilPromotable();
    },
  },
  {
    kind: 'kafka-leader-kill',
    what: "SIGKILL the broker leading the request topic's first partition, start it again, wait until every replica is in sync",
    async inject(t) {
      const cluster = t.kafkaCluster!;
      const leader = await cluster.leaderOf(REQUEST_TOPIC, 0);
      await cluster.kill(leader);
      await sleep(2000);
      await cluster.start(leader);
      await cluster.untilInSync();
    },
  },
  {
    kind: 'kafka-broker-hang',
    what: 'SIGSTOP one Kafka broker for 10 s (its sockets open, nothing answering), resume it',
    async inject(t, rng) {
      const cluster = t.kafkaCluster!;
      const node = pick(cluster.nodeIds, rng);
      cluster.pause(node);
      await sleep(10_000);
      cluster.resume(node);
      await cluster.untilInSync();
    },
  },
  {
    kind: 'zookeeper-leader-kill',
    what: 'SIGKILL the ZooKeeper leader (the ensemble elects another), start it again',
    async inject(t) {
      const zk = t.zkEnsemble!;
      const leader = await zk.leader();
      await zk.kill(leader);
      await sleep(2000);
      await zk.start(leader);
    },
  },
  {
    kind: 'zookeeper-quorum-lost',
    what: "SIGKILL two of the three ZooKeeper servers (no quorum) for 12 s, longer than every session's timeout, then start them: every client (lease, fence) must reconnect or open a new session",
    async inject(t) {
      const zk = t.zkEnsemble!;
      const leader = await zk.leader();
      const follower = zk.ids.find((id) => id !== leader)!;
      await Promise.all([zk.kill(leader), zk.kill(follower)]);
      await sleep(12_000);
      await Promise.all([zk.start(leader), zk.start(follower)]);
    },
  },
];

/** The single servers' own faults: with `ha`, each kind's replicated faults and Patroni failovers take their place. */
const SINGLE_SERVER_KINDS = new Set([
  'redis-kill',
  'redis-old-snapshot',
  'redis-pause',
  'postgres-restart',
  'postgres-down',
  'zookeeper-down',
  'zookeeper-expiry',
  'kafka-restart',
  'kafka-kill',
]);

/** The fault kinds of a topology. */
export function faultsFor(kind: TopologyKind): readonly Fault[] {
  return kind === 'ha'
    ? [...FAULTS.filter((f) => !SINGLE_SERVER_KINDS.has(f.kind)), ...REPLICATED_FAULTS, patroniFailover(false), patroniFailover(true)]
    : FAULTS;
}

export const FAULTS: readonly Fault[] = [
  killRole('api'),
  killRole('responder'),
  killRole('refill'),
  {
    kind: 'kill-several',
    what: 'SIGKILL an api, a responder and a refill worker at once, start them again',
    async inject(t, rng) {
      const roles = (['api', 'responder', 'refill'] as const).map((k) => pick([`${k}-1`, `${k}-2`] as RoleName[], rng));
      await Promise.all(roles.map((r) => t.killRole(r)));
      await sleep(1000);
      await Promise.all(roles.map((r) => t.startRole(r)));
    },
  },
  {
    kind: 'api-freeze',
    what: 'SIGSTOP an api process for 12 s, longer than its ZooKeeper sessions (worker-id lease 6 s, fence 10 s): they expire meanwhile; on SIGCONT it must issue nothing under the old lease and take its id again',
    async inject(t, rng) {
      const role = pick(['api-1', 'api-2'] as RoleName[], rng);
      await t.freezeRole(role, 12_000);
      await t.untilRoleReady(role, 60_000);
    },
  },
  {
    kind: 'redis-kill',
    what: 'SIGKILL Redis and start it empty (every pool and queue lost)',
    async inject(t) {
      await t.server('redis').kill();
      await sleep(1000);
      await t.server('redis').start();
    },
  },
  {
    kind: 'redis-old-snapshot',
    what: 'snapshot Redis (SAVE), serve 5 s more, SIGKILL it and restart it from that older snapshot (pools hold IDs already handed out)',
    async inject(t) {
      const server = t.server('redis');
      const client = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
      try {
        await client.connect();
        await client.save();
      } finally {
        client.disconnect();
      }
      await sleep(5000);
      await server.kill();
      await server.start(); // loads dump.rdb from its directory
      // Later "restarted empty" faults must find no snapshot.
      rmSync(join(server.dir, 'redis', 'dump.rdb'), { force: true });
    },
  },
  clockBack(3, 3000, "step an api process's clock back 3 ms for 3 s (waited out, invariant 6)"),
  clockBack(2000, 4000, "step an api process's clock back 2 s for 4 s (CLOCK_BACKWARDS for its Snowflake IDs until it catches up)"),
  {
    kind: 'redis-pause',
    what: 'SIGSTOP Redis for 5 s (a hung server: the port stays open)',
    async inject(t) {
      await t.server('redis').pause();
      await sleep(5000);
      await t.server('redis').resume();
    },
  },
  {
    kind: 'postgres-restart',
    what: 'restart Postgres',
    async inject(t) {
      await t.server('postgres').restart();
    },
  },
  {
    kind: 'postgres-down',
    what: 'stop Postgres for 10 s',
    async inject(t) {
      await t.server('postgres').stop();
      await sleep(10_000);
      await t.server('postgres').start();
    },
  },
  {
    kind: 'zookeeper-down',
    what: 'stop ZooKeeper, restart an api process while it is down (cached worker id), start ZooKeeper',
    async inject(t, rng) {
      const role = pick(['api-1', 'api-2'] as RoleName[], rng);
      await t.server('zookeeper').stop();
      await t.killRole(role);
      await t.startRole(role);
      await sleep(2000);
      await t.server('zookeeper').start();
    },
  },
  {
    kind: 'zookeeper-expiry',
    what: "SIGSTOP ZooKeeper for 12 s, longer than every session's timeout: on SIGCONT it expires them, and every client (lease, fence) must open a new session and take its nodes again",
    async inject(t) {
      await t.server('zookeeper').pause();
      await sleep(12_000);
      await t.server('zookeeper').resume();
    },
  },
  {
    kind: 'kafka-restart',
    what: 'restart the Kafka broker',
    async inject(t) {
      await t.server('kafka').restart();
    },
  },
  {
    kind: 'kafka-kill',
    what: 'SIGKILL the Kafka broker, start it again',
    async inject(t) {
      await t.server('kafka').kill();
      await sleep(1000);
      await t.server('kafka').start();
    },
  },
];

/** With several regions: one region's every process SIGKILLed at once (the region dies), then started again. */
export const REGION_KILL: Fault = {
  kind: 'region-kill',
  what: 'SIGKILL every process of one region at once (the others serve on), start them again 2 s later',
  async inject(t) {
    await Promise.all(ROLES.map((r) => t.killRole(r)));
    await sleep(2000);
    await t.startRole('api-1');
    await Promise.all(ROLES.filter((r) => r !== 'api-1').map((r) => t.startRole(r)));
  },
};

/** A small seeded generator (mulberry32): the same seed gives the same schedule. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Every kind once in a seeded order, then seeded picks: the first round covers every fault. */
export function schedule(rng: () => number, faults: readonly Fault[] = FAULTS): () => Fault {
  const firstRound = [...faults];
  for (let i = firstRound.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [firstRound[i], firstRound[j]] = [firstRound[j]!, firstRound[i]!];
  }
  return () => firstRound.shift() ?? pick(faults, rng);
}
