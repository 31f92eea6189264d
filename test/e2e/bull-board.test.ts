import { mkdirSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Browser } from 'playwright-core';
import { launchChromium } from '../support/chromium.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeAdminGuard } from '../../src/http/auth.js';
import { registerBullBoard } from '../../src/dashboard/bull-board.js';
import { SWEEP_SCHEDULER_ID } from '../../src/refill/queue.js';
import { startHarness, type Harness } from '../integration/refill/helpers.js';
import { freshStore, type TestStore } from '../support/store.js';
import { uid } from '../support/names.js';
import { until } from '../support/poll.js';
import { env } from '../support/env.js';
import { spawnServer } from '../support/spawn.js';

const REDIS_URL = env('REDIS_URL');

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const ARTIFACTS = `${ROOT}test/artifacts`;
const TOKEN = `tok-${uid()}-${uid()}`;

describe('refill dashboard at /ui in real headless Chromium', () => {
  let app: FastifyInstance;
  let base: string;
  let readOnlyApp: FastifyInstance;
  let readOnlyBase: string;
  let store: TestStore;
  let harness: Harness;
  let browser: Browser;

  beforeAll(async () => {
    store = await freshStore();
    const tag = await store.store.createBiz({ bizTag: `ui-${uid()}`, step: 100 });
    harness = await startHarness({ redisUrl: REDIS_URL, store: store.store, queueName: `idmint-refill-ui-${uid()}` });
    // Something to look at: a completed threshold refill, a scheduled sweep and a failed job.
    await harness.queue.requestRefill(tag.bizTag, 0, 'threshold');
    await harness.queue.scheduleSweeps(60_000);
    await harness.queue.queue.add('refill', { malformed: true }, { attempts: 2 });
    const h = harness;
    await until('the malformed job to fail', async () => ((await h.queue.counts()).failed ?? 0) > 0);

    app = Fastify();
    await registerBullBoard(app, { queues: [harness.queue.queue], authorize: makeAdminGuard(TOKEN) });
    base = await app.listen({ host: '127.0.0.1', port: 0 });
    // The same queue as an operator off loopback sees it by default (IDMINT_UI_READONLY).
    readOnlyApp = Fastify();
    await registerBullBoard(readOnlyApp, { queues: [harness.queue.queue], authorize: makeAdminGuard(TOKEN), readOnly: true });
    readOnlyBase = await readOnlyApp.listen({ host: '127.0.0.1', port: 0 });
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await readOnlyApp?.close();
    await harness?.close();
    await store?.close();
  });

  it('refuses without the admin token (401 with a basic-auth challenge) and accepts Bearer or basic auth', async () => {
    const none = await fetch(`${base}/ui`);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Basic /);
    expect(await none.json()).toMatchObject({ error: { code: 'UNAUTHORIZED' } });
    expect((await fetch(`${base}/ui/api/queues`, { headers: { authorization: 'Bearer wrong-token' } })).status).toBe(401);
    expect((await fetch(`${base}/ui/static/favicon-32x32.png`)).status).toBe(401);

    const bearer = await fetch(`${base}/ui`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(bearer.status).toBe(200);
    expect(await bearer.text()).toContain('<html');
    const basic = await fetch(`${base}/ui/api/queues`, { headers: { authorization: `Basic ${Buffer.from(`admin:${TOKEN}`).toString('base64')}` } });
    expect(basic.status).toBe(200);
    const body = (await basic.json()) as { queues: Array<{ name: string; counts: Record<string, number> }> };
    expect(body.queues.map((q) => q.name)).toEqual([harness.queueName]);
    expect(body.queues[0]!.counts.failed).toBeGreaterThanOrEqual(1);
  });

  it('loads in Chromium behind basic auth, lists the refill queue, and saves a screenshot', async () => {
    // Without credentials Chromium gets the challenge and, having no password to offer, gives up.
    const anonymous = await browser.newContext();
    await expect((await anonymous.newPage()).goto(`${base}/ui`)).rejects.toThrow(/ERR_INVALID_AUTH_CREDENTIALS/);
    expect((await anonymous.request.get(`${base}/ui`)).status()).toBe(401);
    await anonymous.close();

    const context = await browser.newContext({ httpCredentials: { username: 'admin', password: TOKEN }, viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    // Every asset comes from this server (bull-board's Google Fonts link is taken out).
    const elsewhere: string[] = [];
    page.on('request', (request) => {
      if (!request.url().startsWith(base) && !request.url().startsWith('data:')) elsewhere.push(request.url());
    });
    const response = await page.goto(`${base}/ui`);
    expect(response?.status()).toBe(200);
    await page.getByText(harness.queueName).first().waitFor({ timeout: 30_000 });

    await page.goto(`${base}/ui/queue/${encodeURIComponent(harness.queueName)}?status=failed`);
    await page
      .getByText(/refill job data must be/)
      .first()
      .waitFor({ timeout: 30_000 });
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: `${ARTIFACTS}/dashboard-failed.png`, fullPage: true });

    await page.goto(`${base}/ui/job-schedulers`);
    await page.getByText(SWEEP_SCHEDULER_ID).first().waitFor({ timeout: 30_000 });
    await page.screenshot({ path: `${ARTIFACTS}/dashboard-schedulers.png`, fullPage: true });

    await page.goto(`${base}/ui`);
    await page.getByText(harness.queueName).first().waitFor({ timeout: 30_000 });
    await page.getByText('Loading...').waitFor({ state: 'hidden', timeout: 30_000 });
    await page.screenshot({ path: `${ARTIFACTS}/dashboard.png`, fullPage: true });
    expect(statSync(`${ARTIFACTS}/dashboard.png`).size).toBeGreaterThan(10_000);
    expect(elsewhere).toEqual([]);
    await context.close();
  });

  it('read-only: the API refuses retry, clean and remove (405), the failed job stays, and Chromium shows no retry button', async () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    const queue = encodeURIComponent(harness.queueName);
    const failedBefore = (await harness.queue.counts()).failed ?? 0;
    for (const [method, path] of [
      ['PUT', `retry/failed`],
      ['PUT', `clean/failed`],
      ['PUT', `empty`],
    ] as const) {
      const response = await fetch(`${readOnlyBase}/ui/api/queues/${queue}/${path}`, { method, headers: auth });
      expect(response.status, `${method} ${path}`).toBe(405);
    }
    expect((await harness.queue.counts()).failed).toBe(failedBefore);
    // Reading still works.
    expect((await fetch(`${readOnlyBase}/ui/api/queues`, { headers: auth })).status).toBe(200);

    const context = await browser.newContext({ httpCredentials: { username: 'admin', password: TOKEN }, viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await page.goto(`${readOnlyBase}/ui/queue/${queue}?status=failed`);
    await page
      .getByText(/refill job data must be/)
      .first()
      .waitFor({ timeout: 30_000 });
    expect(await page.getByRole('button', { name: /retry/i }).count()).toBe(0);
    // The writable board shows the button on the same page.
    await page.goto(`${base}/ui/queue/${queue}?status=failed`);
    await page
      .getByText(/refill job data must be/)
      .first()
      .waitFor({ timeout: 30_000 });
    expect(await page.getByRole('button', { name: /retry/i }).count()).toBeGreaterThan(0);
    await context.close();
  });

  it('idmint serve: its board is read-only off loopback or with IDMINT_UI_READONLY=true (405 on retry), writable on loopback by default', async () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    for (const [host, readonly, status] of [
      ['127.0.0.1', 'true', 405],
      ['127.0.0.1', undefined, 200],
      ['0.0.0.0', undefined, 405],
    ] as const) {
      const server = await spawnServer({
        DATABASE_URL: store.url,
        REDIS_URL,
        IDMINT_HOST: host,
        IDMINT_ADMIN_TOKEN: TOKEN,
        IDMINT_REFILL_QUEUE: `idmint-refill-ro-${uid()}`,
        ...(readonly === undefined ? {} : { IDMINT_UI_READONLY: readonly }),
      });
      try {
        const { queues } = (await (await fetch(`${server.url}/ui/api/queues`, { headers: auth })).json()) as { queues: Array<{ name: string }> };
        const response = await fetch(`${server.url}/ui/api/queues/${encodeURIComponent(queues[0]!.name)}/retry/failed`, { method: 'PUT', headers: auth });
        expect(response.status, `IDMINT_HOST=${host} IDMINT_UI_READONLY=${readonly}`).toBe(status);
      } finally {
        await server.stop('SIGTERM');
      }
    }
  }, 120_000);
});
