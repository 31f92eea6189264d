import { existsSync, readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { browserAdminHook } from '../http/auth.js';
import { IdmintError } from '../core/errors.js';
import { withDeadline } from '../core/last-known.js';
import type { RememberedTags } from '../core/remembered-tags.js';
import type { MirroredDashboardStore } from './mirror.js';
import { dashboardPageHtml, type PageLinks } from './page.js';
import type { LiveProcess } from './processes.js';
import type { DashboardReporter } from './reporter.js';
import { dashboardView } from './view.js';

export interface DashboardPageOptions {
  /** The history, mirrored in memory: the page answers from memory while the shared store (Redis) is down. */
  store: Pick<MirroredDashboardStore, 'read' | 'held'>;
  /** This process's reporter: its report is made fresh for every page load, store or not. */
  reporter: Pick<DashboardReporter, 'report'>;
  /** The tags now, or as last read (Postgres down). */
  tags: Pick<RememberedTags, 'read'>;
  /** The processes Postgres saw heartbeating lately: asked while Redis cannot be read. */
  live?: (() => Promise<readonly LiveProcess[]>) | undefined;
  /** Throws UNAUTHORIZED for a request without the admin token. */
  authorize: (request: FastifyRequest) => void;
  sampleMs: number;
  /** How much history the page draws (the store keeps at least this much). */
  historyMs: number;
  /** 'redis' when the history is shared by the deployment, 'memory' when it is this process's. */
  storeKind: 'redis' | 'memory';
  /** Links shown in the header besides /status, /metrics and /docs. */
  links: PageLinks;
}

/** The dashboard's Content-Security-Policy: its own scripts, stylesheet and data, its favicon's data: URL. */
export const DASHBOARD_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** The page's scripts (ES modules) and stylesheet, read once (shipped as files beside the sources, like the Lua scripts). */
const ASSETS = {
  'app.js': 'text/javascript; charset=utf-8',
  'dom.js': 'text/javascript; charset=utf-8',
  'overview.js': 'text/javascript; charset=utf-8',
  'tags.js': 'text/javascript; charset=utf-8',
  'chart.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
} as const;

/** How long the page waits for Postgres's list of live processes. */
const LIVE_TIMEOUT_MS = 1500;

function readAsset(name: keyof typeof ASSETS): string {
  const beside = new URL(`./assets/${name}`, import.meta.url);
  // Compiled code lives in dist/src/dashboard; the assets stay in src/dashboard/assets.
  return readFileSync(existsSync(beside) ? beside : new URL(`../../../src/dashboard/assets/${name}`, import.meta.url), 'utf8');
}

/**
 * `/dashboard`: the refill dashboard. An attention-first summary (tags below target, failing
 * refills, silent processes, servers down), every process, and per tag its pool depth against its
 * target over time, refills, demand, fallback share and Kafka lag, filtered and sorted in the
 * page; refreshed live by a small script from `/dashboard/data.json`. Through any one server's
 * outage it answers 200 with what is still known and names the server that is down. Every asset
 * comes from this server (its CSP allows no other); the admin token guards it as it does `/ui`.
 */
export async function dashboardRoutes(app: FastifyInstance, options: DashboardPageOptions): Promise<void> {
  app.addHook('onRequest', browserAdminHook(options.authorize));
  // Only this server's own scripts and stylesheet run: a value that slipped past escaping still
  // cannot run script (no inline script, no handler attributes, nothing from elsewhere).
  app.addHook('onSend', async (_request, reply) => {
    void reply.header('content-security-policy', DASHBOARD_CSP).header('x-content-type-options', 'nosniff');
  });
  const assets = Object.fromEntries(Object.keys(ASSETS).map((name) => [name, readAsset(name as keyof typeof ASSETS)])) as Record<keyof typeof ASSETS, string>;

  app.get('/dashboard', async (_request, reply) => {
    const config = { sampleMs: options.sampleMs, historyMs: options.historyMs, store: options.storeKind };
    return reply.type('text/html; charset=utf-8').header('cache-control', 'no-store').send(dashboardPageHtml(config, options.links));
  });

  for (const name of Object.keys(ASSETS) as Array<keyof typeof ASSETS>) {
    app.get(`/dashboard/${name}`, async (_request, reply) => reply.type(ASSETS[name]).header('cache-control', 'no-cache').send(assets[name]));
  }

  app.get('/dashboard/data.json', async (request) => {
    const since = sinceOf((request.query as Record<string, unknown>).since, options.historyMs);
    const now = Date.now();
    // Each read is bounded and none is fatal: a server that is down is named, not a 503.
    const [self, tags, history] = await Promise.all([options.reporter.report(now), options.tags.read(), options.store.read(since)]);
    const live =
      history.error !== undefined && options.storeKind === 'redis' && options.live
        ? await withDeadline(options.live(), LIVE_TIMEOUT_MS, 'listing the live processes in Postgres').catch(() => undefined)
        : undefined;
    return dashboardView({
      now,
      sampleMs: options.sampleMs,
      storeKind: options.storeKind,
      self,
      tags,
      history,
      held: options.store.held(now - options.historyMs),
      live,
    });
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
