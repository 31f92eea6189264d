import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChangeFeed } from '../../../src/core/ports.js';
import { DeploymentWatch } from '../../../src/deployment/watch.js';
import { openChangeFeed } from '../../../src/store/change-feed.js';
import type { Database } from '../../../src/store/db.js';
import { PostgresDeploymentRecord } from '../../../src/store/deployment-record.js';
import { migrate } from '../../../src/store/migrations.js';
import { createPgliteDatabase } from '../../../src/store/pglite.js';
import { until } from '../../support/poll.js';
import { freshStore, type TestStore } from '../../support/store.js';

const ZK = 'zookeeper /idmint/snowflake';

// The deployment record (issue 39) and the change feed, on the real Postgres and on PGlite: the
// same SQL, triggers and LISTEN on both.
for (const kind of ['postgres', 'pglite'] as const) {
  describe(`the deployment record on ${kind}`, () => {
    let store: TestStore | undefined;
    let lite: Database | undefined;
    const open = async (): Promise<Database> => {
      if (kind === 'postgres') {
        store = await freshStore('deploy');
        return store.db;
      }
      lite = await createPgliteDatabase();
      await migrate(lite);
      return lite;
    };
    afterEach(async () => {
      await store?.close();
      await lite?.close();
      store = undefined;
      lite = undefined;
    });

    it('the first of several processes starting at once records each setting; every one then reads the same', async () => {
      const db = await open();
      const records = Array.from({ length: 6 }, (_, i) => new PostgresDeploymentRecord(db, `p${i}`));
      await Promise.all(records.map((r, i) => r.claim({ 'worker-id-registry': i === 0 ? ZK : `postgres-${i}`, 'segment-fence': 'off' })));
      const states = await Promise.all(records.map((r) => r.read()));
      expect(new Set(states.map((s) => s.values['worker-id-registry'])).size).toBe(1);
      expect([...states[0]!.ever].sort()).toEqual(['segment-fence', 'worker-id-registry']);
      expect(states[0]!.values.region).toBe('single');
    });

    it('a removed setting is not claimed again by a newcomer; an explicit set restores it', async () => {
      const db = await open();
      const record = new PostgresDeploymentRecord(db, 'p');
      await record.claim({ 'obfuscation-key-fingerprint': 'first' });
      await db.query("DELETE FROM idmint_setting WHERE name = 'obfuscation-key-fingerprint'");
      await record.claim({ 'obfuscation-key-fingerprint': 'second' });
      const gone = await record.read();
      expect(gone.values['obfuscation-key-fingerprint']).toBeUndefined();
      expect(gone.ever.has('obfuscation-key-fingerprint')).toBe(true);
      expect(await record.set('obfuscation-key-fingerprint', 'first')).toBeUndefined();
      expect((await record.read()).values['obfuscation-key-fingerprint']).toBe('first');
    });

    it('live processes report what they hold; a stopped one leaves', async () => {
      const db = await open();
      const record = new PostgresDeploymentRecord(db, 'p');
      await record.heartbeat({ id: 'one', address: '10.0.0.1:8080', roles: 'api', view: { 'worker-id-registry': 'postgres' } });
      await record.heartbeat({ id: 'two', address: '10.0.0.2:8080', roles: 'refill', view: {} });
      expect((await record.live(60_000)).map((p) => [p.address, p.view['worker-id-registry']])).toEqual([
        ['10.0.0.1:8080', 'postgres'],
        ['10.0.0.2:8080', undefined],
      ]);
      await record.leave('two');
      expect((await record.live(60_000)).map((p) => p.id)).toEqual(['one']);
    });

    it('a change to a tag, its tokens or the record is pushed to a listener of the same schema within moments', async () => {
      const db = await open();
      let feed: ChangeFeed | undefined;
      try {
        feed = await openChangeFeed(db);
        const heard: string[] = [];
        feed.subscribe({ change: (c) => heard.push(`${c.table}:${c.bizTag ?? ''}`), reset: () => undefined });
        await until('the feed to listen', () => feed!.connected);
        await db.query("INSERT INTO idmint_biz (biz_tag) VALUES ('pushed')");
        await db.query("UPDATE idmint_biz SET max_limit = 50, fallback = 'segment' WHERE biz_tag = 'pushed'");
        await db.query("INSERT INTO idmint_tag_token (biz_tag, token_hash, prefix) VALUES ('pushed', 'h', 'p')");
        await new PostgresDeploymentRecord(db, 'p').claim({ 'segment-fence': 'off' });
        await until(
          'four kinds of change to arrive',
          () => ['idmint_biz:pushed', 'idmint_tag_token:pushed', 'idmint_setting:'].every((c) => heard.includes(c)),
          { timeoutMs: 5000 },
        );
        expect(heard.filter((c) => c === 'idmint_biz:pushed').length).toBeGreaterThanOrEqual(2);
      } finally {
        await feed?.close();
      }
    });

    it('a watch holds a process to the record: a difference appearing while it runs closes its path, and is lifted when it agrees again', async () => {
      const db = await open();
      const record = new PostgresDeploymentRecord(db, 'p');
      const registry = new Registry();
      const watch = new DeploymentWatch({
        record,
        view: { 'worker-id-registry': ZK, region: 'single' },
        report: { id: 'w', address: 'here:1', roles: 'api' },
        everyMs: 50,
        registry,
      });
      await watch.start();
      try {
        expect(watch.refusal('snowflake')).toBeUndefined();
        await record.set('worker-id-registry', 'postgres');
        await until('the watch to see the change', () => watch.refusal('snowflake') !== undefined);
        expect(await registry.getSingleMetricAsString('idmint_deployment_mismatch')).toContain('setting="worker-id-registry"} 1');
        await record.set('worker-id-registry', ZK);
        await until('the watch to agree again', () => watch.refusal('snowflake') === undefined);
        // The region split recorded under a running single-region process (regions apply) closes its worker ids.
        await db.query('INSERT INTO idmint_region (regions, region, stripe) VALUES (2, 0, 1000)');
        await until('the region difference', () => watch.refusal('uid') !== undefined);
      } finally {
        await watch.close();
      }
      expect(await record.live(60_000)).toEqual([]);
    });
  });
}

describe('the change feed over Postgres', () => {
  it('a lost listening connection is told (caches drop everything) and the feed listens again', async () => {
    const store = await freshStore('feed');
    const feed = await openChangeFeed(store.db);
    try {
      let resets = 0;
      const heard: string[] = [];
      feed.subscribe({ change: (c) => heard.push(c.bizTag ?? ''), reset: () => resets++ });
      await until('the feed to listen', () => feed.connected);
      const before = resets;
      // Postgres ends the listening backend (what a restart or failover does to it).
      await store.db.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN idmint_changes' AND pid <> pg_backend_pid()");
      await until('the loss to be told', () => resets > before);
      await until('the feed to listen again', () => feed.connected, { timeoutMs: 10_000 });
      await store.db.query("INSERT INTO idmint_biz (biz_tag) VALUES ('after')");
      await until('a change after the reconnect', () => heard.includes('after'), { timeoutMs: 5000 });
    } finally {
      await feed.close();
      await store.close();
    }
  });
});
