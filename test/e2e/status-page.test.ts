import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright-core';
import { launchChromium } from '../support/chromium.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const ARTIFACTS = `${ROOT}test/artifacts`;
const TOKEN = 'status-page-token';

describe('the /status page of an embedded server (no Redis), in real headless Chromium', () => {
  let server: SpawnedServer;
  let dataDir: string;
  let browser: Browser;
  const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-status-'));
    server = await spawnServer({ IDMINT_DATA_DIR: dataDir, IDMINT_ADMIN_TOKEN: TOKEN });
    await fetch(`${server.url}/v1/biz`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ bizTag: 'invoice', step: 100, maxLimit: 1_000_000, description: '<b>escaped</b>' }),
    });
    await fetch(`${server.url}/v1/biz`, { method: 'POST', headers: admin, body: JSON.stringify({ bizTag: 'trace', mode: 'snowflake' }) });
    for (let i = 0; i < 20; i++) {
      await fetch(`${server.url}/v1/ids/invoice?count=50`);
      await fetch(`${server.url}/v1/ids/trace?count=10`);
    }
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('needs the admin token, and serves its data as JSON too', async () => {
    const none = await fetch(`${server.url}/status`);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Basic /);
    const json = (await (await fetch(`${server.url}/status.json`, { headers: admin })).json()) as {
      tags: Array<{ bizTag: string; mode: string; buffered: number; maxLimit: number | null }>;
      history: Array<{ pool: number; segment: number; snowflake: number }>;
    };
    const invoice = json.tags.find((t) => t.bizTag === 'invoice');
    expect(invoice).toMatchObject({ mode: 'segment', maxLimit: 1_000_000 });
    expect(invoice!.buffered).toBeGreaterThan(0);
    const issued = json.history.reduce((s, b) => s + b.pool + b.segment + b.snowflake, 0);
    expect(issued).toBeGreaterThanOrEqual(20 * 50 + 20 * 10);
    expect(json.history.reduce((s, b) => s + b.snowflake, 0)).toBeGreaterThanOrEqual(200);
  });

  it('renders tags, limits and a source chart in Chromium behind basic auth, and saves a screenshot', async () => {
    const anonymous = await browser.newContext();
    await expect((await anonymous.newPage()).goto(`${server.url}/status`)).rejects.toThrow(/ERR_INVALID_AUTH_CREDENTIALS/);
    await anonymous.close();

    const context = await browser.newContext({ httpCredentials: { username: 'admin', password: TOKEN }, viewport: { width: 1100, height: 800 } });
    const page = await context.newPage();
    expect((await page.goto(`${server.url}/status`))?.status()).toBe(200);
    await page.locator('#tags').getByText('invoice').waitFor({ timeout: 30_000 });
    expect(await page.locator('#tags tr', { hasText: 'trace' }).innerText()).toMatch(/snowflake/);
    expect(await page.locator('#tags tr', { hasText: 'invoice' }).innerText()).toContain('1000000');
    // User text is escaped, not rendered.
    expect(await page.locator('#tags b').count()).toBe(0);
    expect(await page.locator('#chart rect[fill="#ef6c00"]').count()).toBeGreaterThan(0);
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: `${ARTIFACTS}/status.png`, fullPage: true });
    expect(statSync(`${ARTIFACTS}/status.png`).size).toBeGreaterThan(5_000);
    await context.close();
  });
});
