import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../support/chromium.js';
import { colourOf, GREY, RED, screenshot } from '../support/dashboard-page.js';
import { env } from '../support/env.js';
import { uid } from '../support/names.js';
import { until, untilValue } from '../support/poll.js';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';

const TOKEN = `tok-${uid()}-${uid()}`;
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const TAGS = 300;

interface TagRow {
  bizTag: string;
  depth: number | null;
  target: number | null;
  fill: number | null;
  lastRefillAt: number | null;
  attention: string[];
}
interface Data {
  tags: TagRow[];
  processes: Array<{ id: string; name: string; state: string; roles: string[] }>;
  summary: { belowTarget: string[]; failingRefills: string[]; silentProcesses: string[]; serversDown: string[] };
}

/**
 * Issue 41: a deployment with 300 tags, as an on-call engineer opens its dashboard. Four tags
 * whose refills fail (their maxLimit is used up), three drained below target while no refill
 * worker runs, a refill process killed (silent) and one stopped cleanly (stopped, grey). The page
 * in real headless Chromium must put that first in its summary, and its filter, "needs attention
 * only" and sorts must pick and order the 300 cards.
 */
describe('the dashboard of a deployment with 300 tags, in real headless Chromium', () => {
  const servers: SpawnedServer[] = [];
  let api: SpawnedServer;
  let refill: SpawnedServer;
  let killed: SpawnedServer;
  let browser: Browser;
  let page: Page;
  let dataDir: string;
  const prefix = `many${uid()}`;
  const name = (i: number) => `${prefix}-${String(i).padStart(3, '0')}`;
  const exhausted = [7, 77, 177, 277].map(name);
  const drained = [30, 130, 230].map(name);
  const shared = {
    DATABASE_URL: env('DATABASE_URL'),
    IDMINT_PG_SCHEMA: `many_${uid()}`.replace(/-/g, '_'),
    REDIS_URL: env('REDIS_URL'),
    IDMINT_POOL_KEY_PREFIX: `${prefix}:`,
    IDMINT_REFILL_QUEUE: `${prefix}-q`,
    IDMINT_ADMIN_TOKEN: TOKEN,
    IDMINT_DASHBOARD_SAMPLE_MS: '2000',
    IDMINT_DASHBOARD_HISTORY_MS: '300000',
  };
  const data = async (): Promise<Data> => (await fetch(`${api.url}/dashboard/data.json`, { headers: admin })).json() as Promise<Data>;
  const port = (s: SpawnedServer) => new URL(s.url).port;
  const cards = () => page.locator('article.tag').evaluateAll((els) => els.map((e) => e.getAttribute('data-tag')));

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-many-'));
    api = await spawnServer({ ...shared, IDMINT_ROLES: 'api', IDMINT_DATA_DIR: dataDir });
    servers.push(api);
    refill = await spawnServer({ ...shared, IDMINT_ROLES: 'refill' });
    servers.push(refill);
    killed = await spawnServer({ ...shared, IDMINT_ROLES: 'refill' });
    servers.push(killed);
    for (let i = 0; i < TAGS; i++) {
      const tag = name(i);
      // A step and limit of 1,000: the first refill takes all of it, the next one fails (SEGMENT_EXHAUSTED).
      const body = exhausted.includes(tag) ? { bizTag: tag, step: 1000, maxLimit: 1000 } : { bizTag: tag, step: 1000 };
      const res = await fetch(`${api.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify(body) });
      expect(res.status).toBe(201);
    }
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1200, height: 1000 }, httpCredentials: { username: 'admin', password: TOKEN } });
  }, 300_000);

  afterAll(async () => {
    await browser?.close();
    for (const s of servers) await s.stop('SIGKILL').catch(() => undefined);
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('builds the scene: every pool filled, four tags whose refills fail, a refill process killed, one stopped, three pools drained', async () => {
    // The scene is built from what every version serves (/v1/stats, the refill events): the assertions after it are the dashboard's.
    type Stats = { pools: Array<{ bizTag: string; depth: number; target: number | null }> };
    const stats = async (): Promise<Stats> => (await fetch(`${api.url}/v1/stats`, { headers: admin })).json() as Promise<Stats>;
    await until('every pool filled', async () => (await stats()).pools.filter((p) => p.target !== null && p.depth > 0).length === TAGS, {
      timeoutMs: 180_000,
      intervalMs: 1000,
    });
    for (const tag of exhausted) expect((await fetch(`${api.url}/v1/ids/${tag}?count=1000`)).status).toBe(200);
    type Events = { refills: Array<{ bizTag: string; status: string }> };
    const failed = async () => new Set(((await data()) as unknown as Events).refills.filter((e) => e.status === 'failed').map((e) => e.bizTag));
    await until('the refills of the exhausted tags failing', async () => (await failed()).size === exhausted.length, { timeoutMs: 60_000, intervalMs: 1000 });
    await killed.stop('SIGKILL');
    // A clean stop: the process says so in its last report.
    expect(await refill.stop('SIGTERM')).toBe(0);
    for (const tag of drained) expect((await fetch(`${api.url}/v1/ids/${tag}?count=850`)).status).toBe(200);
    const d = await untilValue(
      'the summary to settle',
      data,
      (x) => x.summary?.belowTarget.length === exhausted.length + drained.length && x.summary.silentProcesses.length === 1,
      { timeoutMs: 60_000, intervalMs: 1000 },
    );
    expect(d.summary.failingRefills.sort()).toEqual([...exhausted].sort());
    expect(d.summary.belowTarget.sort()).toEqual([...exhausted, ...drained].sort());
    expect(d.summary.serversDown).toEqual([]);
    const row = (s: SpawnedServer) => d.processes.find((p) => p.id.endsWith(`:${s.child.pid}`));
    expect(row(killed)).toMatchObject({ state: 'silent', roles: ['refill'] });
    expect(row(refill)).toMatchObject({ state: 'stopped', roles: ['refill'] });
    // Named host:port: two processes on this machine told apart by their ports.
    expect(row(api)!.name).toMatch(new RegExp(`:${port(api)}$`));
    expect(row(killed)!.name).toMatch(new RegExp(`:${port(killed)}$`));
    expect(d.summary.silentProcesses).toEqual([`${row(killed)!.name} (refill)`]);
  }, 300_000);

  it('puts what needs attention on top: failing refills, tags below target, the silent process, no server down', async () => {
    await page.goto(`${api.url}/dashboard`);
    const count = (key: string) => page.textContent(`#summary [data-summary="${key}"] .count`);
    await until('the summary drawn', async () => (await count('below-target')) === '7', { timeoutMs: 30_000 });
    expect(await count('failing-refills')).toBe('4');
    expect(await count('silent-processes')).toBe('1');
    expect(await count('servers-down')).toBe('0');
    for (const tag of exhausted) expect(await page.textContent('#summary [data-summary="failing-refills"]')).toContain(tag);
    expect(await colourOf(page, '#summary [data-summary="failing-refills"]', 'backgroundColor')).not.toBe('rgba(0, 0, 0, 0)');
    // The first cards are the tags that need attention, failing refills first.
    expect(await page.textContent('#tag-count')).toMatch(/^showing 50 of 300, 7 need attention$/);
    const first = await cards();
    expect(first.slice(0, 4).sort()).toEqual([...exhausted].sort());
    expect(first.slice(4, 7).sort()).toEqual([...drained].sort());
    expect(await page.locator(`article.tag[data-tag="${exhausted[0]}"] .badge.failing-refills`).count()).toBe(1);
    // The processes: the killed one red and silent, the stopped one grey.
    const silent = `#health tr[data-process$=":${killed.child.pid}"]`;
    const stopped = `#health tr[data-process$=":${refill.child.pid}"]`;
    expect(await page.getAttribute(silent, 'data-state')).toBe('silent');
    expect(await colourOf(page, `${silent} .status`, 'backgroundColor')).toBe(RED);
    expect(await page.getAttribute(stopped, 'data-state')).toBe('stopped');
    expect(await colourOf(page, `${stopped} .status`, 'backgroundColor')).toBe(GREY);
    expect(await page.textContent(`${stopped} .status`)).toBe('stopped');
    expect(await page.textContent(`${stopped} .name`)).toMatch(new RegExp(`:${port(refill)}$`));
    expect(await page.locator('#health tr[data-state="ready"]').count()).toBe(1);
    await screenshot(page, 'dashboard-300-tags');
  }, 120_000);

  it('filters by tag name and by "needs attention only"', async () => {
    await page.fill('#tag-filter', `${prefix}-01`);
    await until('the filter applied', async () => (await cards()).length === 10, { timeoutMs: 10_000 });
    expect((await cards()).every((t) => t!.startsWith(`${prefix}-01`))).toBe(true);
    expect(await page.textContent('#tag-count')).toMatch(/showing 10 of 300 \(10 match\)/);
    await page.fill('#tag-filter', '');
    await page.check('#attention-only');
    await until('only the tags needing attention', async () => (await cards()).length === 7, { timeoutMs: 10_000 });
    expect((await cards()).sort()).toEqual([...exhausted, ...drained].sort());
    // Both at once, and the view kept in the address.
    await page.fill('#tag-filter', '-2');
    await until('both filters applied', async () => (await cards()).length === 2, { timeoutMs: 10_000 });
    expect((await cards()).sort()).toEqual([name(230), name(277)]);
    expect(new URL(page.url()).hash).toBe('#filter=-2&attention=1');
    await page.reload();
    await until('the view restored from the address', async () => (await cards()).length === 2, { timeoutMs: 30_000 });
    expect(await page.inputValue('#tag-filter')).toBe('-2');
    await page.fill('#tag-filter', '');
    await page.uncheck('#attention-only');
    await until('every tag back', async () => (await page.textContent('#tag-count'))?.startsWith('showing 50 of 300') === true, { timeoutMs: 10_000 });
    await page.click('#show-more');
    await until('all 300 cards', async () => (await cards()).length === TAGS, { timeoutMs: 30_000 });
  }, 120_000);

  it('sorts by name, depth, fill ratio and last refill', async () => {
    const d = await data();
    const by = (key: 'depth' | 'fill' | 'lastRefillAt') =>
      [...d.tags].sort((a, b) => (a[key] ?? Infinity) - (b[key] ?? Infinity) || a.bizTag.localeCompare(b.bizTag)).map((t) => t.bizTag);
    const check = async (sort: string, expected: string[]) => {
      await page.selectOption('#tag-sort', sort);
      await until(`sorted by ${sort}`, async () => JSON.stringify((await cards()).slice(0, 12)) === JSON.stringify(expected.slice(0, 12)), {
        timeoutMs: 15_000,
      });
      expect(new URL(page.url()).hash).toContain(`sort=${sort}`);
    };
    await check('name', d.tags.map((t) => t.bizTag).sort());
    // Nothing refills now: depths, fills and refill times stand still between the read and the page.
    await check('depth', by('depth'));
    expect((await cards()).slice(0, 4).sort()).toEqual([...exhausted].sort());
    await check('fill', by('fill'));
    expect((await cards()).slice(4, 7).sort()).toEqual([...drained].sort());
    await check('last-refill', by('lastRefillAt'));
    // The summary's "show them" narrows the list to the tags below target, emptiest first.
    await page.click('#summary [data-summary="below-target"] button');
    await until('the tags below target, by fill', async () => (await cards()).length === 7, { timeoutMs: 10_000 });
    expect((await cards()).slice(0, 4).sort()).toEqual([...exhausted].sort());
    expect(await page.inputValue('#tag-sort')).toBe('fill');
  }, 120_000);
});
