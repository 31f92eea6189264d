import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { launchChromium } from '../support/chromium.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { env } from '../support/env.js';
import { uid } from '../support/names.js';
import { until } from '../support/poll.js';
import { startPrivateServer, type PrivateServer } from '../support/servers.js';
import { freePort, spawnServer, type SpawnedServer } from '../support/spawn.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const ARTIFACTS = `${ROOT}test/artifacts`;
const TOKEN = `tok-${uid()}-${uid()}`;
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

/**
 * The refill dashboard as an operator opens it: `idmint serve` with the API and refill roles on
 * a private Redis (killed at the end), Postgres and Kafka; the page in real headless Chromium;
 * assertions on what it draws.
 */
describe('the refill dashboard at /dashboard in real headless Chromium', () => {
  let redis: PrivateServer;
  let server: SpawnedServer;
  let browser: Browser;
  let page: Page;
  let dataDir: string;
  const elsewhere: string[] = [];
  const listTag = `dash-${uid()}`;
  const kafkaTag = `dashk-${uid()}`;

  beforeAll(async () => {
    redis = await startPrivateServer('redis');
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-dashboard-'));
    server = await spawnServer({
      DATABASE_URL: env('DATABASE_URL'),
      IDMINT_PG_SCHEMA: `dash_${uid()}`.replace(/-/g, '_'),
      REDIS_URL: redis.url,
      KAFKA_BROKERS: env('KAFKA_BROKERS'),
      // No responder: the shared Kafka's request topic belongs to other tests.
      IDMINT_ROLES: 'api,refill',
      IDMINT_DATA_DIR: dataDir,
      IDMINT_ADMIN_TOKEN: TOKEN,
      IDMINT_DASHBOARD_SAMPLE_MS: '300',
    });
    for (const [bizTag, pool] of [
      [listTag, 'redis-list'],
      [kafkaTag, 'kafka'],
    ]) {
      const res = await fetch(`${server.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify({ bizTag, step: 1000, pool }) });
      expect(res.status).toBe(201);
    }
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1100, height: 1000 }, httpCredentials: { username: 'admin', password: TOKEN } });
    page.on('request', (request) => {
      if (!request.url().startsWith(server.url) && !request.url().startsWith('data:')) elsewhere.push(request.url());
    });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.stop('SIGTERM');
    await redis?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  const panel = (tag: string) => `article.tag[data-tag="${tag}"]`;
  const lastDepth = async (tag: string) => Number(await page.getAttribute(`${panel(tag)} svg.chart`, 'data-last-depth'));
  const take = (tag: string, count: number) => fetch(`${server.url}/v1/ids/${tag}?count=${count}`).then((r) => expect(r.status).toBe(200));

  it('asks for the admin token and answers bad input with the error JSON', async () => {
    expect((await fetch(`${server.url}/dashboard`)).status).toBe(401);
    const bad = await fetch(`${server.url}/dashboard/data.json?since=yesterday`, { headers: admin });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { code: 'BAD_REQUEST' } });
  });

  it('draws the pool depth against its target, and a take moves the depth line', async () => {
    await page.goto(`${server.url}/dashboard`);
    // The tag's first refill (asked for when it was created) fills 1,000 IDs.
    await until(
      'the pool filled and drawn',
      async () => (await page.locator(`${panel(listTag)} svg.chart`).count()) > 0 && (await lastDepth(listTag)) >= 1000,
      { timeoutMs: 30_000 },
    );
    expect(await page.locator(`${panel(listTag)} polyline.target`).count()).toBe(1);
    const before = await lastDepth(listTag);
    const line = await page.getAttribute(`${panel(listTag)} polyline.depth`, 'points');
    await take(listTag, 300);
    await until('the depth line to go down by the take', async () => (await lastDepth(listTag)) <= before - 300, { timeoutMs: 15_000 });
    expect(await page.getAttribute(`${panel(listTag)} polyline.depth`, 'points')).not.toBe(line);
    expect(await page.textContent(`${panel(listTag)} [data-stat="issued"] dd`)).toMatch(/\d+\/s/);
  });

  it('puts refills on the timeline with their reason and duration', async () => {
    const threshold = `${panel(listTag)} rect.refill[data-reason="threshold"][data-status="pushed"]`;
    expect(await page.locator(`${panel(listTag)} rect.refill[data-reason="manual"]`).count()).toBeGreaterThanOrEqual(1);
    const before = await page.locator(threshold).count();
    // Under a fifth of the target: the pool asks for a threshold refill.
    await take(listTag, Math.max(1, (await lastDepth(listTag)) - 100));
    await until('a threshold refill on the timeline', async () => (await page.locator(threshold).count()) > before, { timeoutMs: 20_000 });
    expect(await page.textContent(`${threshold} >> nth=-1 >> title`)).toMatch(/threshold refill of shard 0: pushed, 1 segment\(s\), [\d,]+ IDs, \d+ ms/);
    expect(await page.textContent(`${panel(listTag)} [data-stat="last-refill"] dd`)).toMatch(/just now|\d+ s ago/);
    expect(await page.textContent(`${panel(listTag)} [data-stat="fallback"] dd`)).toMatch(/%/);
  });

  it("shows a Kafka pool topic's depth and its group's lag", async () => {
    const row = `${panel(kafkaTag)} table.kafka tr[data-topic="idmint.ids.${kafkaTag}"]`;
    await until(
      'the Kafka pool topic drawn',
      async () => (await page.locator(row).count()) > 0 && Number((await page.textContent(`${row} td.n >> nth=0`))!.replace(/,/g, '')) > 0,
      { timeoutMs: 30_000 },
    );
    expect(await page.textContent(`${row} td >> nth=1`)).toBe(`idmint.pool.${kafkaTag}`);
    expect(await page.textContent(`${row} td >> nth=3`)).toMatch(/^\d+( · \d+)*$/);
  });

  it('keeps its history across a reload (it lives in Redis), shows every server green, and loads nothing from elsewhere', async () => {
    const drawn = async () => Number(await page.getAttribute(`${panel(listTag)} svg.chart`, 'data-points'));
    await until('a few samples drawn', async () => (await drawn()) > 5, { timeoutMs: 15_000 });
    const points = await drawn();
    await page.reload();
    await until(
      'the history drawn again',
      async () => Number((await page.getAttribute(`${panel(listTag)} svg.chart`, 'data-points').catch(() => '0')) ?? 0) >= points,
      { timeoutMs: 10_000 },
    );
    for (const check of ['database', 'redis', 'snowflake', 'refill']) {
      expect(await page.getAttribute(`#health [data-check="${check}"]`, 'class')).toBe('check ok');
    }
    expect(await page.textContent('#health .status')).toBe('ready');
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: `${ARTIFACTS}/refill-dashboard.png`, fullPage: true });
    expect(elsewhere).toEqual([]);
  });

  it('shows a killed Redis in red, and keeps what it has drawn', async () => {
    const points = Number(await page.getAttribute(`${panel(listTag)} svg.chart`, 'data-points'));
    await redis.kill();
    const redisCheck = '#health tr[data-process] >> nth=0 >> [data-check="redis"]';
    await until('the redis check red', async () => (await page.getAttribute(redisCheck, 'class')) === 'check bad', { timeoutMs: 15_000 });
    // The colour as drawn (the page's own red), not only the class.
    const colour = await page
      .locator(redisCheck)
      .evaluate((el) => (globalThis as unknown as { getComputedStyle(e: unknown): { backgroundColor: string } }).getComputedStyle(el).backgroundColor);
    expect(colour).toBe('rgb(198, 40, 40)');
    expect(await page.textContent('#health .status')).toBe('degraded');
    expect(await page.getAttribute('#store-note', 'class')).toBe('bad');
    expect(Number(await page.getAttribute(`${panel(listTag)} svg.chart`, 'data-points'))).toBeGreaterThanOrEqual(points);
    await page.screenshot({ path: `${ARTIFACTS}/refill-dashboard-redis-down.png`, fullPage: true });
    expect(elsewhere).toEqual([]);
  });
});

/** The whole deployment from any API process: refills by a separate refill process, every process's health. */
describe('the dashboard of a deployment with separate API and refill processes', () => {
  const servers: SpawnedServer[] = [];
  const dirs: string[] = [];

  afterAll(async () => {
    for (const s of servers) await s.stop('SIGTERM').catch(() => undefined);
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("shows the refill process's refills and health from the API process, and a killed process as silent", async () => {
    const shared = {
      DATABASE_URL: env('DATABASE_URL'),
      IDMINT_PG_SCHEMA: `dashp_${uid()}`.replace(/-/g, '_'),
      REDIS_URL: env('REDIS_URL'),
      IDMINT_POOL_KEY_PREFIX: `dashp-${uid()}:`,
      IDMINT_REFILL_QUEUE: `dashp-${uid()}`,
      IDMINT_ADMIN_TOKEN: TOKEN,
      IDMINT_DASHBOARD_SAMPLE_MS: '300',
    };
    const dir = () => {
      const d = mkdtempSync(join(tmpdir(), 'idmint-dashboard-'));
      dirs.push(d);
      return d;
    };
    const refill = await spawnServer({ ...shared, IDMINT_ROLES: 'refill' });
    servers.push(refill);
    const api = await spawnServer({ ...shared, IDMINT_ROLES: 'api', IDMINT_DATA_DIR: dir() });
    servers.push(api);
    const bizTag = `dashp-${uid()}`;
    expect(
      (await fetch(`${api.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify({ bizTag, step: 1000, pool: 'redis-list' }) })).status,
    ).toBe(201);
    type Data = {
      processes: Array<{ id: string; roles: string[]; status: string; silent: boolean }>;
      refills: Array<{ bizTag: string; by: string; status: string }>;
      samples: Array<{ pools: Array<{ bizTag: string; depth: number }> }>;
    };
    const data = async (): Promise<Data> => (await fetch(`${api.url}/dashboard/data.json`, { headers: admin })).json() as Promise<Data>;
    const refillId = (d: Data) => d.processes.find((p) => p.roles.join() === 'refill' && p.id.endsWith(`:${refill.child.pid}`));
    await until(
      'the refill process and its refill seen from the API process',
      async () => {
        const d = await data();
        return refillId(d)?.status === 'ready' && d.refills.some((e) => e.bizTag === bizTag && e.status === 'pushed' && e.by.endsWith(`:${refill.child.pid}`));
      },
      { timeoutMs: 30_000 },
    );
    await fetch(`${api.url}/v1/ids/${bizTag}?count=100`);
    await until('the pool in the samples', async () => (await data()).samples.some((s) => s.pools.some((p) => p.bizTag === bizTag && p.depth > 0)), {
      timeoutMs: 10_000,
    });
    const d = await data();
    expect(d.processes[0]!.id.endsWith(`:${api.child.pid}`)).toBe(true);

    await refill.stop('SIGKILL');
    await until('the killed refill process shown silent', async () => refillId(await data())?.silent === true, { timeoutMs: 10_000 });
  });

  it('a Ctrl-C restart (SIGINT) shows the old process stopped, not silent; a killed one restarted on its address is stopped too', async () => {
    const shared = {
      DATABASE_URL: env('DATABASE_URL'),
      IDMINT_PG_SCHEMA: `dashr_${uid()}`.replace(/-/g, '_'),
      REDIS_URL: env('REDIS_URL'),
      IDMINT_POOL_KEY_PREFIX: `dashr-${uid()}:`,
      IDMINT_REFILL_QUEUE: `dashr-${uid()}`,
      IDMINT_ADMIN_TOKEN: TOKEN,
      IDMINT_DASHBOARD_SAMPLE_MS: '300',
    };
    const dataDir = mkdtempSync(join(tmpdir(), 'idmint-dashboard-'));
    dirs.push(dataDir);
    const api = await spawnServer({ ...shared, IDMINT_ROLES: 'api', IDMINT_DATA_DIR: dataDir });
    servers.push(api);
    const port = String(await freePort());
    type Data = { processes: Array<{ id: string; name: string; state: string }> };
    const data = async (): Promise<Data> => (await fetch(`${api.url}/dashboard/data.json`, { headers: admin })).json() as Promise<Data>;
    const state = async (s: SpawnedServer) => (await data()).processes.find((p) => p.id.endsWith(`:${s.child.pid}`))?.state;

    const first = await spawnServer({ ...shared, IDMINT_ROLES: 'refill', IDMINT_PORT: port });
    servers.push(first);
    await until('the refill process ready', async () => (await state(first)) === 'ready', { timeoutMs: 30_000 });
    expect(await first.stop('SIGINT')).toBe(0);
    const second = await spawnServer({ ...shared, IDMINT_ROLES: 'refill', IDMINT_PORT: port });
    servers.push(second);
    await until('the new process ready', async () => (await state(second)) === 'ready', { timeoutMs: 30_000 });
    expect(await state(first)).toBe('stopped');

    await second.stop('SIGKILL');
    const third = await spawnServer({ ...shared, IDMINT_ROLES: 'refill', IDMINT_PORT: port });
    servers.push(third);
    await until(
      'the third process ready and the killed one past its silence',
      async () => (await state(third)) === 'ready' && (await state(second)) !== 'ready',
      { timeoutMs: 30_000 },
    );
    // Its address is held by a process started after it: it was restarted, not lost.
    expect(await state(second)).toBe('stopped');
    const d = await data();
    expect(d.processes.filter((p) => p.state === 'silent')).toEqual([]);
    expect(d.processes.find((p) => p.id.endsWith(`:${third.child.pid}`))!.name).toMatch(new RegExp(`:${port}$`));
  });
});
