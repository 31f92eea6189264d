import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../support/chromium.js';
import { colourOf, GREY, RED, screenshot } from '../support/dashboard-page.js';
import { uid } from '../support/names.js';
import { until } from '../support/poll.js';
import { startPrivateServer, type PrivateServer, type ServerName } from '../support/servers.js';
import { spawnServer, untilReady, type SpawnedServer } from '../support/spawn.js';

const TOKEN = `tok-${uid()}-${uid()}`;
const RECORD_STATUS_LINES = `document.addEventListener('DOMContentLoaded', () => {
  const el = document.getElementById('updated');
  if (!el) return;
  new MutationObserver(() => {
    const seen = JSON.parse(sessionStorage.getItem('updates') || '[]');
    seen.push(el.textContent);
    sessionStorage.setItem('updates', JSON.stringify(seen));
  }).observe(el, { childList: true, characterData: true, subtree: true });
});`;
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

interface Data {
  tags: Array<{ bizTag: string }>;
  tagsFrom: { source: string };
  processes: Array<{ id: string; name: string; state: string; status: string; silent: boolean; checks: Record<string, { ok: boolean }> }>;
  down?: Array<{ id: string; name: string; message: string }>;
  summary: { silentProcesses: string[] };
  storeError?: string;
}

/**
 * Issue 41, item 4: the dashboard when it is needed. A deployment on private servers (Redis,
 * Postgres, ZooKeeper, Kafka) with two API processes; each server is stopped in turn and a fresh
 * page is opened in real headless Chromium. The page must keep showing every tag and process,
 * name the server that is down in red, and never say "cannot reach this server" (the server
 * answers). On 75daf01 data.json answered 503 with Postgres down and the page said it could not
 * reach the server; with Redis down a fresh page had only its own process and no history.
 */
describe('the dashboard through each single outage, in real headless Chromium', () => {
  const servers = {} as Record<ServerName, PrivateServer>;
  let a: SpawnedServer;
  let b: SpawnedServer;
  let browser: Browser;
  let page: Page;
  const dirs: string[] = [];
  const tags = [...Array.from({ length: 6 }, (_, i) => [`out-${uid()}-${i}`, 'redis-list']), [`outk-${uid()}`, 'kafka']] as Array<[string, string]>;

  const data = async (): Promise<Data> => {
    const res = await fetch(`${a.url}/dashboard/data.json`, { headers: admin });
    expect(res.status).toBe(200);
    return res.json() as Promise<Data>;
  };
  const dir = () => {
    const d = mkdtempSync(join(tmpdir(), 'idmint-outage-'));
    dirs.push(d);
    return d;
  };

  beforeAll(async () => {
    const started = await Promise.all((['redis', 'postgres', 'zookeeper', 'kafka'] as const).map((n) => startPrivateServer(n)));
    for (const s of started) servers[s.name] = s;
    const env = {
      DATABASE_URL: servers.postgres.url,
      REDIS_URL: servers.redis.url,
      ZK_CONNECT: servers.zookeeper.url,
      KAFKA_BROKERS: servers.kafka.url,
      IDMINT_ADMIN_TOKEN: TOKEN,
      IDMINT_DASHBOARD_SAMPLE_MS: '1000',
      // A lease renewed every two seconds: ZooKeeper's absence shows within seconds.
      IDMINT_WORKER_ID_LEASE_MS: '6000',
    };
    a = await spawnServer({ ...env, IDMINT_ROLES: 'api,refill,responder', IDMINT_DATA_DIR: dir() }, { timeoutMs: 120_000 });
    b = await spawnServer({ ...env, IDMINT_ROLES: 'api', IDMINT_DATA_DIR: dir() }, { timeoutMs: 120_000 });
    await untilReady(a.url, { timeoutMs: 120_000, output: a.output });
    await untilReady(b.url, { timeoutMs: 120_000, output: b.output });
    for (const [bizTag, pool] of tags) {
      expect((await fetch(`${a.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify({ bizTag, step: 1000, pool }) })).status).toBe(201);
    }
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1200, height: 1400 }, httpCredentials: { username: 'admin', password: TOKEN } });
    // Every text the status line ever shows, kept across reloads (injected by the browser, not by the page: the CSP stays as served).
    await page.addInitScript({ content: RECORD_STATUS_LINES });
    await until(
      'both processes on the dashboard and nothing down',
      async () => {
        const d = await data();
        return (d.down ?? []).length === 0 && d.processes.filter((p) => p.status === 'ready' && !p.silent).length === 2;
      },
      { timeoutMs: 120_000, intervalMs: 1000 },
    );
  }, 600_000);

  afterAll(async () => {
    await browser?.close();
    for (const s of [a, b]) await s?.stop('SIGKILL').catch(() => undefined);
    for (const s of Object.values(servers)) await s.close().catch(() => undefined);
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  const statusLines = async (): Promise<string[]> =>
    page.url().startsWith('http') ? (JSON.parse(((await page.evaluate('sessionStorage.getItem("updates")')) as string | null) ?? '[]') as string[]) : [];

  /** The readiness check of the page's own process that names `server`. */
  const CHECK: Record<ServerName, string> = { redis: 'redis', postgres: 'database', zookeeper: 'zookeeper', kafka: 'kafka' };

  /** Whether the page's server has noticed the outage: it says so, or its own check fails, or data.json no longer answers 200. */
  async function noticed(server: ServerName): Promise<boolean> {
    const res = await fetch(`${a.url}/dashboard/data.json`, { headers: admin });
    if (res.status !== 200) return true;
    const d = (await res.json()) as Data;
    return (d.down ?? []).some((x) => x.id === server) || d.processes[0]?.checks[CHECK[server]]?.ok === false;
  }

  /** Opens a fresh page while `server` is down and checks what every outage must keep. */
  async function freshPageDuring(server: ServerName): Promise<void> {
    await until(`the server to notice ${server} down`, () => noticed(server), { timeoutMs: 120_000, intervalMs: 1000 });
    expect((await fetch(`${a.url}/dashboard/data.json`, { headers: admin })).status, 'data.json answers').toBe(200);
    const before = (await statusLines()).length;
    await page.goto(`${a.url}/dashboard`);
    // Let a few polls pass: none may say the server cannot be reached (it answers).
    await until('a few polls', async () => (await statusLines()).slice(before).length >= 3, { timeoutMs: 30_000 });
    expect((await statusLines()).filter((l) => /cannot reach/.test(l))).toEqual([]);
    const banner = `#down p[data-server="${server}"]`;
    await page.locator(banner).waitFor({ timeout: 30_000 });
    expect(await colourOf(page, banner)).toBe(RED);
    expect(await page.textContent(`${banner} b`)).toMatch(/^(Redis|Postgres|ZooKeeper|Kafka) is down$/);
    expect(await page.textContent('#summary [data-summary="servers-down"]')).toContain((await page.textContent(`${banner} b`))!.replace(' is down', ''));
    expect(await page.locator('article.tag').count()).toBe(tags.length);
    for (const [bizTag] of tags) expect(await page.locator(`article.tag[data-tag="${bizTag}"]`).count()).toBe(1);
    // Both processes, by their ports; neither called silent because a server is down.
    for (const s of [a, b])
      expect(await page.locator(`#health tr[data-process$=":${s.child.pid}"] .name`).textContent()).toMatch(new RegExp(`:${new URL(s.url).port}$`));
    expect(await page.locator('#health tr[data-state="silent"]').count()).toBe(0);
    expect(await page.evaluate('document.body.classList.contains("offline")')).toBe(false);
    expect((await statusLines()).filter((l) => /cannot reach/.test(l))).toEqual([]);
    await screenshot(page, `dashboard-${server}-down`);
  }

  async function back(server: ServerName): Promise<void> {
    await servers[server].start();
    await until(`${server} back on the dashboard`, async () => !((await data()).down ?? []).some((x) => x.id === server), {
      timeoutMs: 120_000,
      intervalMs: 1000,
    });
  }

  it("Redis down: the history from the server's memory, the other API unheard (grey) with Postgres saying it is alive", async () => {
    await page.goto(`${a.url}/dashboard`);
    const redisTag = tags[0]![0];
    await until('some depth history drawn', async () => Number(await page.getAttribute(`article.tag[data-tag="${redisTag}"] svg.chart`, 'data-points')) > 2, {
      timeoutMs: 30_000,
    });
    await servers.redis.kill();
    await freshPageDuring('redis');
    // A fresh page still draws the depth history it had (this server's copy of it).
    for (const [bizTag, pool] of tags) {
      if (pool !== 'redis-list') continue;
      expect(Number(await page.getAttribute(`article.tag[data-tag="${bizTag}"] svg.chart`, 'data-points'))).toBeGreaterThan(0);
    }
    const other = `#health tr[data-process$=":${b.child.pid}"]`;
    expect(await page.getAttribute(other, 'data-state')).toBe('unheard');
    expect(await colourOf(page, `${other} .status`, 'backgroundColor')).toBe(GREY);
    expect(await page.textContent(`${other} .note`)).toMatch(/Postgres saw it/);
    expect(await page.getAttribute('#store-note', 'class')).toBe('bad');
    await back('redis');
  }, 300_000);

  it('Postgres down: data.json, /status and /status.json answer 200 with the tags as last read', async () => {
    await servers.postgres.stop();
    await freshPageDuring('postgres');
    expect((await data()).tagsFrom.source).toBe('memory');
    const status = await fetch(`${a.url}/status.json`, { headers: admin });
    expect(status.status).toBe(200);
    const json = (await status.json()) as { tags: Array<{ bizTag: string }>; down: Array<{ id: string }> };
    expect(json.tags.map((t) => t.bizTag).sort()).toEqual(tags.map(([t]) => t).sort());
    expect(json.down.map((d) => d.id)).toContain('postgres');
    const html = await page.goto(`${a.url}/status`);
    expect(html?.status()).toBe(200);
    expect(await colourOf(page, '#down p[data-server="postgres"]')).toBe(RED);
    expect(await page.locator('#tags tbody tr').count()).toBe(tags.length);
    await back('postgres');
  }, 300_000);

  it('Kafka down: named in red, every tag and process still shown', async () => {
    await servers.kafka.stop();
    await freshPageDuring('kafka');
    await back('kafka');
  }, 300_000);

  it('ZooKeeper down: named in red, every tag and process still shown', async () => {
    await servers.zookeeper.stop();
    await freshPageDuring('zookeeper');
    // Whether the processes get ZooKeeper back is item 1 of the issue, not the dashboard's: it is started again and left.
    await servers.zookeeper.start();
  }, 300_000);
});
