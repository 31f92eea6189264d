import { describe, expect, it } from 'vitest';
import { readinessOf, type ReadinessSources } from '../../../src/app/readiness.js';
import type { Dependency } from '../../../src/core/episode.js';

/** A process with the refill role: Postgres up or down, Redis up or down, and its refill worker's own word. */
function sources(o: { database: boolean; redis: boolean; refill: ReadinessSources['refillHealth'] }): ReadinessSources {
  return {
    db: { query: async () => (o.database ? { rows: [] } : Promise.reject(new Error('connect ECONNREFUSED'))) } as unknown as ReadinessSources['db'],
    redis: { connection: { check: () => (o.redis ? { ok: true } : { ok: false, message: 'redis is reconnecting' }) } } as unknown as ReadinessSources['redis'],
    snowflake: undefined,
    deployment: () => undefined,
    refillState: () => 'running',
    refillHealth: o.refill,
    responderState: () => 'off',
  };
}

describe('readiness of the refill role', () => {
  // The worker's rule (RefillWorker.health): failing refills keep it not ready unless the server they failed on is back.
  const failedOn =
    (dependency: Dependency | undefined) =>
    (isBack: (d: Dependency) => boolean): { ok: boolean; message?: string } =>
      dependency !== undefined && isBack(dependency) ? { ok: true } : { ok: false, message: 'refills failing' };

  it('is not ready while its refills fail on a server that is still down', async () => {
    const report = await readinessOf(sources({ database: false, redis: true, refill: failedOn('postgres') }))();
    expect(report.checks.refill).toMatchObject({ ok: false });
    expect(report.status).toBe('not_ready');
  });

  it('is ready as soon as the server its refills failed on answers again, before the next refill', async () => {
    const report = await readinessOf(sources({ database: true, redis: true, refill: failedOn('postgres') }))();
    expect(report.checks.refill).toMatchObject({ ok: true });
    expect(report.status).toBe('ready');
  });

  it('stays not ready when refills fail for a reason no server check covers', async () => {
    const report = await readinessOf(sources({ database: true, redis: true, refill: failedOn(undefined) }))();
    expect(report.checks.refill).toMatchObject({ ok: false });
    expect(report.status).toBe('degraded');
  });

  it('a refill role that has not started is not ready', async () => {
    const s = sources({ database: true, redis: true, refill: failedOn(undefined) });
    const report = await readinessOf({ ...s, refillState: () => 'starting' })();
    expect(report.checks.refill).toEqual({ ok: false, message: 'the refill worker has not started yet' });
  });
});

describe('readiness of the responder role', () => {
  const responder = (health: { ok: boolean; message?: string }, state: 'running' | 'starting' = 'running'): ReadinessSources => ({
    ...sources({ database: true, redis: true, refill: undefined }),
    refillState: () => 'off',
    responderState: () => state,
    responderHealth: () => health,
  });

  it("says what the responder's consumer says: not ready while its group is not joined or it does not fetch", async () => {
    const down = await readinessOf(responder({ ok: false, message: 'not joined to group idmint.responders: Connection error' }))();
    expect(down.checks.kafka).toEqual({ ok: false, message: 'not joined to group idmint.responders: Connection error' });
    expect(down.status).toBe('degraded');
    const up = await readinessOf(responder({ ok: true }))();
    expect(up.checks.kafka).toEqual({ ok: true });
    expect(up.status).toBe('ready');
  });

  it('a responder still starting is not ready, whatever its consumer would say', async () => {
    const report = await readinessOf(responder({ ok: true }, 'starting'))();
    expect(report.checks.kafka).toMatchObject({ ok: false });
  });
});
