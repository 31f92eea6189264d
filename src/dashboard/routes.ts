import { existsSync, readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { browserAdminHook } from '../http/auth.js';
import { IdmintError } from '../core/errors.js';
import type { BizTag } from '../core/ports.js';
import { SILENT_INTERVALS, type DashboardReporter } from './reporter.js';
import type { DashboardStore, ProcessReport } from './store.js';

export interface DashboardPageOptions {
  store: DashboardStore;
  /** This process's reporter: its report is made fresh for every page load, store or not. */
  reporter: DashboardReporter;
  tags: () => Promise<BizTag[]>;
  /** Throws UNAUTHORIZED for a request without the admin token. */
  authorize: (request: FastifyRequest) => void;
  sampleMs: number;
  /** How much history the page draws (the store keeps at least this much). */
  historyMs: number;
  /** 'redis' when the history is shared by the deployment, 'memory' when it is this process's. */
  storeKind: 'redis' | 'memory';
  /** Links shown in the header besides /status, /metrics and /docs. */
  links: { ui?: string | undefined; grafana?: string | undefined };
}

/** The dashboard's Content-Security-Policy: its own script, stylesheet and data, its favicon's data: URL. */
export const DASHBOARD_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** The page's script and stylesheet, read once (shipped as files beside the sources, like the Lua scripts). */
const ASSETS = {
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
} as const;

function readAsset(name: keyof typeof ASSETS): string {
  const beside = new URL(`./assets/${name}`, import.meta.url);
  // Compiled code lives in dist/src/dashboard; the assets stay in src/dashboard/assets.
  return readFileSync(existsSync(beside) ? beside : new URL(`../../../src/dashboard/assets/${name}`, import.meta.url), 'utf8');
}

/**
 * `/dashboard`: the refill dashboard. One page with, per tag, pool depth against its target over
 * time, the refills with their reason and duration, demand, fallback share, the last refill's
 * age, Kafka pool topics' depth and lag, and every process's health; refreshed live by a small
 * script from `/dashboard/data.json`. Every asset comes from this server (its CSP allows no other);
 * the admin token guards it as it does `/ui` and `/status`.
 */
export async function dashboardRoutes(app: FastifyInstance, options: DashboardPageOptions): Promise<void> {
  app.addHook('onRequest', browserAdminHook(options.authorize));
  // Only this server's own script and stylesheet run: a value that slipped past escaping still
  // cannot run script (no inline script, no handler attributes, nothing from elsewhere).
  app.addHook('onSend', async (_request, reply) => {
    void reply.header('content-security-policy', DASHBOARD_CSP).header('x-content-type-options', 'nosniff');
  });
  const assets = Object.fromEntries(Object.keys(ASSETS).map((name) => [name, readAsset(name as keyof typeof ASSETS)])) as Record<keyof typeof ASSETS, string>;

  app.get('/dashboard', async (_request, reply) => {
    const config = { sampleMs: options.sampleMs, historyMs: options.historyMs, store: options.storeKind };
    return reply.type('text/html; charset=utf-8').header('cache-control', 'no-store').send(page(config, options.links));
  });

  for (const name of Object.keys(ASSETS) as Array<keyof typeof ASSETS>) {
    app.get(`/dashboard/${name}`, async (_request, reply) => reply.type(ASSETS[name]).header('cache-control', 'no-cache').send(assets[name]));
  }

  app.get('/dashboard/data.json', async (request) => {
    const since = sinceOf((request.query as Record<string, unknown>).since, options.historyMs);
    const now = Date.now();
    const self = await options.reporter.report(now);
    const tags = await options.tags();
    try {
      const [samples, refills, reports] = await Promise.all([options.store.samples(since), options.store.refills(since), options.store.reports()]);
      return { now, store: options.storeKind, self: self.id, tags: tags.map(tagView), processes: processesView(reports, self, now, options.sampleMs), samples, refills };
    } catch (err) {
      // The store is Redis and Redis is down: this process's health, and what the page already has.
      return { now, store: options.storeKind, storeError: (err as Error).message, self: self.id, tags: tags.map(tagView), processes: processesView([], self, now, options.sampleMs), samples: [], refills: [] };
    }
  });
}

/** `since` in epoch ms; absent means the whole history. */
function sinceOf(raw: unknown, historyMs: number): number {
  const floor = Date.now() - historyMs;
  if (raw === undefined || raw === '') return floor;
  const since = Number(raw);
  if (typeof raw !== 'string' || !/^\d{1,15}$/.test(raw) || !Number.isSafeInteger(since)) {
    throw new IdmintError('BAD_REQUEST', 'since must be a time in epoch milliseconds, e.g. since=1764201600000');
  }
  return Math.max(floor, since);
}

function tagView(t: BizTag) {
  return { bizTag: t.bizTag, mode: t.mode, pool: t.pool, shards: t.shards, fallback: t.fallback };
}

function processesView(reports: ProcessReport[], self: ProcessReport, now: number, sampleMs: number) {
  const others = reports.filter((r) => r.id !== self.id);
  return [self, ...others.sort((a, b) => a.id.localeCompare(b.id))].map((r) => {
    const { issued: _issued, kafka: _kafka, ...rest } = r;
    return { ...rest, silentMs: now - r.at, silent: now - r.at > SILENT_INTERVALS * sampleMs };
  });
}

function page(config: Record<string, unknown>, links: DashboardPageOptions['links']): string {
  const link = (href: string, text: string) => `<a href="${esc(href)}">${esc(text)}</a>`;
  const nav = [
    links.ui ? link(links.ui, 'BullMQ (/ui)') : '',
    link('status', 'status'),
    link('docs', 'API docs'),
    link('metrics', 'metrics'),
    links.grafana ? link(links.grafana, 'Grafana') : '',
  ].filter(Boolean).join(' · ');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>idmint dashboard</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">
<link rel="stylesheet" href="dashboard/app.css"></head>
<body>
<header><h1>idmint</h1><nav>${nav}</nav><span id="updated" aria-live="polite">loading…</span></header>
<section><h2>Servers and processes</h2><table id="health"><thead><tr><th>process</th><th>roles</th><th>status</th><th>checks</th><th>version</th><th>last report</th></tr></thead><tbody></tbody></table>
<p id="store-note"></p></section>
<section><h2>Tags</h2><div class="legend"><span><i class="depth"></i>depth</span><span><i class="target"></i>target</span><span>refills: <i class="r-threshold"></i>threshold <i class="r-cron"></i>cron <i class="r-manual"></i>manual <i class="r-failed"></i>failed <i class="r-skipped"></i>skipped</span></div>
<div id="tags"></div></section>
<script type="application/json" id="dashboard-config">${JSON.stringify(config).replace(/</g, '\\u003c')}</script>
<script src="dashboard/app.js"></script>
</body></html>`;
}

function esc(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
