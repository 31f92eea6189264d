import { Gauge, type Registry } from 'prom-client';
import type { SqlClient } from '../store/db.js';
import type { PgServer } from '../store/pg.js';
import type { SnowflakeSource } from '../dispenser/sources/snowflake.js';
import type { ReadinessReport } from '../http/server.js';
import type { RedisPools } from './pools.js';
import type { Dependency } from '../core/episode.js';

type RoleState = () => 'running' | 'starting' | 'off';

/** The refill worker's own check; `isBack` says whether a server its refills failed on answers again. */
export type RefillHealth = (isBack: (dependency: Dependency) => boolean) => { ok: boolean; message?: string };

export interface ReadinessSources {
  db: SqlClient;
  /** Where a Postgres database is connected and what it saw (a multi-host URL moves with the primary). */
  dbServer?: (() => PgServer) | undefined;
  redis: RedisPools | undefined;
  /** The process's Snowflake generator; absent where no IDs are handed out (the refill role alone). */
  snowflake: SnowflakeSource | undefined;
  /** Differences from the deployment record (src/deployment/watch.ts): absent when the process agrees. */
  deployment: () => { ok: boolean; message: string; hint: string } | undefined;
  /** Why this process cannot sign what it writes to Kafka, when it writes there and cannot. */
  signing?: () => { ok: boolean; message: string; hint: string } | undefined;
  /** The segment fence (ZooKeeper), where segments are fenced: down, no segment can be claimed. */
  fence?: (() => { ok: boolean; message?: string }) | undefined;
  refillState: RoleState;
  refillHealth?: RefillHealth | undefined;
  responderState: RoleState;
  /** The responder's own check (its group joined and fetching); without it a started responder counts as ready. */
  responderHealth?: (() => { ok: boolean; message?: string }) | undefined;
}

/**
 * The readiness rule (README "Health"; docs/reliability.md): `ready` when every configured server
 * answers; `degraded` (HTTP 200) while some rung of the fallback ladder can still serve; `not_ready`
 * (503) only when this process can serve nothing. One dependency down must never take every
 * instance out of an orchestrator's rotation.
 */
export function readinessOf(sources: ReadinessSources): () => Promise<ReadinessReport> {
  return async () => {
    const checks: ReadinessReport['checks'] = {};
    try {
      await sources.db.query('SELECT 1');
      checks.database = { ok: true, ...failoverNote(sources.dbServer?.()) };
    } catch (err) {
      checks.database = { ok: false, message: (err as Error).message };
    }
    if (sources.redis) checks.redis = sources.redis.connection.check();
    if (sources.fence) checks['segment-fence'] = sources.fence();
    const { snowflake } = sources;
    if (snowflake) {
      try {
        snowflake.lease.assertIssuable(Date.now());
        checks.snowflake = { ok: true, message: `worker ${snowflake.workerId} from ${snowflake.lease.provider}` };
      } catch (err) {
        checks.snowflake = { ok: false, message: (err as Error).message };
      }
      const server = snowflake.lease.health?.();
      if (server) checks[snowflake.lease.provider] = server;
    }
    const deployment = sources.deployment();
    if (deployment) checks.deployment = deployment;
    const signing = sources.signing?.();
    if (signing) checks.signing = signing;
    const responder = sources.responderState();
    if (responder === 'starting') checks.kafka = { ok: false, message: 'the Kafka responder has not joined its group yet' };
    else if (responder === 'running') checks.kafka = sources.responderHealth?.() ?? { ok: true };
    const refill = sources.refillState();
    if (refill === 'starting') checks.refill = { ok: false, message: 'the refill worker has not started yet' };
    else if (refill === 'running') {
      // Its last refills failed on a server that answers again: ready now, the next refill will tell.
      const isBack = (dependency: Dependency): boolean =>
        ({ postgres: checks.database?.ok === true, redis: checks.redis?.ok === true, zookeeper: checks['segment-fence']?.ok !== false, kafka: false })[
          dependency
        ];
      checks.refill = sources.refillHealth?.(isBack) ?? { ok: true };
    }

    if (Object.values(checks).every((c) => c.ok)) return { status: 'ready', checks };
    // A process that hands out IDs serves while any rung can: a pool (Redis), a segment
    // (Postgres) or Snowflake. A refill worker does nothing without both Postgres and Redis.
    const segments = checks.database.ok && checks['segment-fence']?.ok !== false;
    const canServe = snowflake ? segments || checks.redis?.ok === true || checks.snowflake?.ok === true : segments && checks.redis?.ok === true;
    return { status: canServe ? 'degraded' : 'not_ready', checks };
  };
}

/** A failover since start, said in the database check (public: it names no host). */
function failoverNote(server: PgServer | undefined): { message?: string; hint?: string } {
  if (!server?.failovers) return {};
  return {
    message: `connected to ${server.host ?? 'the primary'} on timeline ${server.timeline ?? '?'}`,
    hint: `Postgres failed over ${server.failovers} time(s) since this process started (now timeline ${server.timeline ?? '?'}); every tag was checked against its segment fence`,
  };
}

/**
 * The readiness answer as metrics, computed at scrape time: `idmint_readiness{status}` is 1 for
 * the current status (the `IdmintDegraded` alert fires on it), `idmint_check_ok{check}` per server.
 */
export function exportReadiness(registry: Registry, readiness: () => Promise<ReadinessReport>): void {
  let pending: Promise<ReadinessReport> | undefined;
  // Both gauges are collected in one scrape: one readiness computation for the two.
  const report = (): Promise<ReadinessReport> => {
    pending ??= readiness().finally(() => setImmediate(() => (pending = undefined)));
    return pending;
  };
  new Gauge({
    name: 'idmint_readiness',
    help: 'What /readyz answers: 1 for the current status (ready, degraded: serving by fallback, not_ready: cannot serve)',
    labelNames: ['status'] as const,
    registers: [registry],
    async collect() {
      const { status: now } = await report();
      for (const s of ['ready', 'degraded', 'not_ready'] as const) this.set({ status: s }, s === now ? 1 : 0);
    },
  });
  new Gauge({
    name: 'idmint_check_ok',
    help: 'Per readiness check: 1 when the server it names answers',
    labelNames: ['check'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const [name, check] of Object.entries((await report()).checks)) this.set({ check: name }, check.ok ? 1 : 0);
    },
  });
}
