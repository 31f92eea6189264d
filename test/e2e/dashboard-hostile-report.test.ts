import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DASHBOARD_CSP } from '../../src/dashboard/routes.js';
import { launchChromium } from '../support/chromium.js';
import { env } from '../support/env.js';
import { uid } from '../support/names.js';
import { until } from '../support/poll.js';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';

const TOKEN = `tok-${uid()}-${uid()}`;
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

/** Markup that runs script if it lands in innerHTML unescaped (as text or in an attribute): it records where it ran. Short: texts are bounded. */
const hostile = (where: string): string => `"'><img src=x onerror=__ran=['${where}']>`;

/**
 * Issue 42, item 7: the dashboard drew process reports read from Redis into innerHTML unescaped
 * (pid, status, shards, numbers), so a report written to Redis ran script in an admin's browser.
 * Here hostile reports, samples and refill events are written straight into the deployment's
 * Redis keys; the page in headless Chromium must run none of it, show the valid ones' text as
 * text, skip the ones that do not match the schema, and be served with a CSP.
 */
describe('the dashboard with hostile entries in Redis, in real headless Chromium', () => {
  let server: SpawnedServer;
  let redis: Redis;
  let browser: Browser;
  let page: Page;
  let dataDir: string;
  const prefix = `xss-${uid()}:`;
  const bizTag = `xss-${uid()}`;
  const dialogs: string[] = [];

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-xss-'));
    server = await spawnServer({
      DATABASE_URL: env('DATABASE_URL'),
      IDMINT_PG_SCHEMA: `xss_${uid()}`.replace(/-/g, '_'),
      REDIS_URL: env('REDIS_URL'),
      IDMINT_POOL_KEY_PREFIX: prefix,
      IDMINT_REFILL_QUEUE: `xss-${uid()}`,
      IDMINT_ROLES: 'api',
      IDMINT_DATA_DIR: dataDir,
      IDMINT_ADMIN_TOKEN: TOKEN,
      IDMINT_DASHBOARD_SAMPLE_MS: '300',
    });
    expect(
      (await fetch(`${server.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify({ bizTag, step: 1000, pool: 'redis-list' }) })).status,
    ).toBe(201);

    redis = new Redis(env('REDIS_URL'));
    const keys = { reports: `${prefix}idmint:dashboard:reports`, samples: `${prefix}idmint:dashboard:samples`, refills: `${prefix}idmint:dashboard:refills` };
    const at = Date.now() + 600_000; // stays fresh (not silent) for the whole test
    const valid = {
      id: `evil-${hostile('id')}`,
      host: hostile('host'),
      pid: 4242,
      roles: [hostile('role')],
      version: hostile('version'),
      startedAt: at,
      at,
      status: 'degraded',
      checks: { [hostile('check')]: { ok: false, message: hostile('message') } },
      issued: { [bizTag]: { pool: 1, segment: 0, snowflake: 0 } },
    };
    // Wrong types where the page used to trust them: a pid and a status made of markup.
    const invalid = { ...valid, id: 'evil-invalid', pid: hostile('pid'), status: hostile('status') };
    await redis.hset(keys.reports, valid.id, JSON.stringify(valid), 'evil-invalid', JSON.stringify(invalid));
    const pool = {
      bizTag,
      shard: 0,
      kind: hostile('kind'),
      depth: 5,
      target: 10,
      rate: 1,
      kafka: { topic: hostile('topic'), group: hostile('group'), lagBlocks: [1], blockIds: 100 },
    };
    await redis.xadd(keys.samples, '*', 'v', JSON.stringify({ at, pools: [pool], issued: {} }));
    await redis.xadd(keys.samples, '*', 'v', JSON.stringify({ at: at + 1, pools: [{ ...pool, depth: hostile('depth') }], issued: {} }));
    const refill = { at, bizTag, shard: 0, reason: hostile('reason'), status: 'pushed', ms: 5, segments: 1, ids: 1000, by: hostile('by') };
    await redis.xadd(keys.refills, '*', 'v', JSON.stringify(refill));
    await redis.xadd(keys.refills, '*', 'v', JSON.stringify({ ...refill, at: at + 1, status: hostile('refill-status'), segments: hostile('segments') }));

    browser = await launchChromium();
    page = await browser.newPage({ httpCredentials: { username: 'admin', password: TOKEN } });
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.stop('SIGTERM');
    if (redis) {
      await redis.del(`${prefix}idmint:dashboard:reports`, `${prefix}idmint:dashboard:samples`, `${prefix}idmint:dashboard:refills`);
      redis.disconnect();
    }
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('runs none of it, shows the valid entries as text, and is served with a CSP allowing only its own scripts', async () => {
    const response = await page.goto(`${server.url}/dashboard`);
    // The hostile but well-formed report and sample are drawn (as text), with the page's own script running.
    const row = `#health tr[data-process^="evil-"]`;
    await until('the hostile report drawn', async () => (await page.locator(row).count()) > 0, { timeoutMs: 30_000 });
    await until('the hostile sample drawn', async () => (await page.locator(`article.tag[data-tag="${bizTag}"] table.kafka`).count()) > 0, {
      timeoutMs: 30_000,
    });
    expect(await page.evaluate(() => (globalThis as { __ran?: string[] }).__ran), 'where hostile markup ran').toBeUndefined();
    expect(dialogs).toEqual([]);
    expect(await page.textContent(row)).toContain(hostile('host'));
    expect(await page.textContent(`article.tag[data-tag="${bizTag}"] table.kafka`)).toContain(hostile('topic'));
    expect(await page.locator(`article.tag[data-tag="${bizTag}"] rect.refill title`).allTextContents()).toEqual([expect.stringContaining(hostile('reason'))]);

    expect(await page.locator('#health img, #health svg, #tags img, #tags table svg').count()).toBe(0);

    const csp = response?.headers()['content-security-policy'];
    expect(csp).toBe(DASHBOARD_CSP);
    expect(csp).toMatch(/(^|; )script-src 'self'(;|$)/);
    expect(csp).not.toContain('unsafe');

    // The entries that do not match the schema are not served at all.
    const data = (await (await fetch(`${server.url}/dashboard/data.json`, { headers: admin })).json()) as {
      processes: Array<{ id: string }>;
      samples: Array<{ at: number }>;
      refills: Array<{ status: string }>;
    };
    expect(data.processes.map((p) => p.id)).not.toContain('evil-invalid');
    expect(data.refills.map((e) => e.status)).toEqual(['pushed']);
    expect(JSON.stringify(data.samples)).not.toContain(hostile('depth'));
  });
});
