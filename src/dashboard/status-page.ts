import type { FastifyInstance, FastifyRequest } from 'fastify';
import { browserAdminHook } from '../http/auth.js';
import type { HistoryBucket } from '../core/history.js';
import { withDeadline } from '../core/last-known.js';
import type { BizStore, BizTag } from '../core/ports.js';
import { RememberedTags } from '../core/remembered-tags.js';
import type { DepthReading } from '../dispenser/metrics.js';

export interface StatusPageOptions {
  store: Pick<BizStore, 'listBiz'>;
  /** The tags as last read, shared with the dashboard; else the page remembers its own. */
  tags?: Pick<RememberedTags, 'read'> | undefined;
  authorize: (request: FastifyRequest) => void;
  /** IDs ready in this process's buffers, per tag and shard. */
  depths: () => DepthReading[];
  /** IDs issued per source over the last minutes. */
  history: () => HistoryBucket[];
  /** Redis pool depths and refill state, when the process has Redis (`/v1/stats`). */
  stats?: () => Promise<Record<string, unknown>>;
}

const SOURCE_COLOURS = { pool: '#2e7d32', segment: '#1565c0', snowflake: '#ef6c00' } as const;
/** How long the page waits for Redis's pool depths. */
const STATS_TIMEOUT_MS = 1500;

/** A server the page could not read, named. */
interface Down {
  id: string;
  name: string;
  message: string;
}

/**
 * `/status`: one page for operators, with or without Redis (Leaf's `/cache` page, and more):
 * every tag with its mode and limits, what this process holds for it, and the IDs issued per
 * source over the last ten minutes as a chart. Server-rendered HTML and SVG, no script; admin
 * token as Bearer or basic-auth password, like `/ui`. `/status.json` serves the same data. With
 * Postgres or Redis down it still answers 200: the tags as last read, and the server named in red.
 */
export async function statusRoutes(app: FastifyInstance, options: StatusPageOptions): Promise<void> {
  app.addHook('onRequest', browserAdminHook(options.authorize));
  const known = options.tags ?? new RememberedTags(options.store);

  const collect = async () => {
    const down: Down[] = [];
    const read = await known.read();
    const tags = read.value ?? [];
    if (read.error !== undefined) {
      const shown =
        read.at !== undefined ? `the tags as read ${Math.round((Date.now() - read.at) / 1000)} s ago` : 'no tags (none was read since this process started)';
      down.push({ id: 'postgres', name: 'Postgres', message: `the tags cannot be read (${read.error}); showing ${shown}` });
    }
    const held = new Map<string, number>();
    for (const d of options.depths()) held.set(d.bizTag, (held.get(d.bizTag) ?? 0) + d.depth);
    const stats = options.stats
      ? await withDeadline(options.stats(), STATS_TIMEOUT_MS, 'reading the pool depths from Redis').catch((err: unknown) => {
          down.push({ id: 'redis', name: 'Redis', message: `the pool depths cannot be read (${(err as Error).message})` });
          return undefined;
        })
      : undefined;
    const pooled = new Map<string, number>();
    for (const p of (stats?.pools as Array<{ bizTag: string; depth: number }> | undefined) ?? []) pooled.set(p.bizTag, (pooled.get(p.bizTag) ?? 0) + p.depth);
    return { tags, held, pooled, history: options.history(), redis: options.stats !== undefined, down };
  };

  app.get('/status.json', async () => {
    const { tags, held, pooled, history, down } = await collect();
    return {
      tags: tags.map((t) => ({
        bizTag: t.bizTag,
        mode: t.mode,
        step: t.step,
        maxLimit: t.maxLimit,
        fallback: t.fallback,
        pool: t.pool,
        buffered: held.get(t.bizTag) ?? 0,
        pooled: pooled.get(t.bizTag) ?? null,
      })),
      history,
      down,
    };
  });

  app.get('/status', async (_request, reply) => {
    const data = await collect();
    return reply.type('text/html; charset=utf-8').header('cache-control', 'no-store').send(renderPage(data));
  });
}

/** The same, in the shape `buildHttpServer({ extensions })` takes. */
export function statusPage(options: Omit<StatusPageOptions, 'authorize'>) {
  return async (app: FastifyInstance, authorize: (request: FastifyRequest) => void): Promise<void> => {
    await app.register(async (scope) => statusRoutes(scope, { ...options, authorize }));
  };
}

function renderPage(data: {
  tags: BizTag[];
  held: Map<string, number>;
  pooled: Map<string, number>;
  history: HistoryBucket[];
  redis: boolean;
  down: Down[];
}): string {
  const rows = data.tags
    .map(
      (t) =>
        `<tr><td>${esc(t.bizTag)}</td><td>${t.mode}</td><td>${t.step}</td><td>${t.maxLimit ?? '—'}</td><td>${t.fallback}</td><td>${t.pool}</td>` +
        `<td class="n">${data.held.get(t.bizTag) ?? 0}</td>${data.redis ? `<td class="n">${data.pooled.get(t.bizTag) ?? '—'}</td>` : ''}<td>${esc(t.description)}</td></tr>`,
    )
    .join('\n');
  const total = data.history.reduce((s, b) => s + b.pool + b.segment + b.snowflake, 0);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="10"><title>idmint status</title>
<style>body{font:14px system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse}td,th{padding:4px 10px;border-bottom:1px solid #ddd;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}.legend span{display:inline-block;margin-right:16px}.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
#down p{color:#c62828;font-weight:600;margin:4px 0}</style></head>
<body><h1>idmint status</h1>
<div id="down" role="alert">${data.down.map((d) => `<p data-server="${esc(d.id)}">${esc(d.name)} is down: ${esc(d.message)}</p>`).join('')}</div>
<h2>IDs issued by this process, last ${Math.round((data.history.length * (data.history[1] && data.history[0] ? data.history[1].at - data.history[0].at : 10_000)) / 60_000)} minutes: ${total}</h2>
<div class="legend">${Object.entries(SOURCE_COLOURS)
    .map(([k, c]) => `<span><i style="background:${c}"></i>${k}</span>`)
    .join('')}</div>
${renderChart(data.history)}
<h2>Tags (${data.tags.length})</h2>
<table id="tags"><thead><tr><th>tag</th><th>mode</th><th>step</th><th>maxLimit</th><th>fallback</th><th>pool</th><th>buffered here</th>${data.redis ? '<th>in Redis</th>' : ''}<th>description</th></tr></thead>
<tbody>${rows || '<tr><td colspan="9">no tags yet: idmint biz create &lt;bizTag&gt;</td></tr>'}</tbody></table>
<p>Refreshes every 10 s. JSON: <a href="status.json">/status.json</a>. Metrics: <a href="metrics">/metrics</a>. Pools and refills over time: <a href="dashboard">/dashboard</a>.</p>
</body></html>`;
}

/** Stacked bars, one per bucket, coloured by source. */
function renderChart(history: HistoryBucket[]): string {
  const width = 720;
  const height = 160;
  const max = Math.max(1, ...history.map((b) => b.pool + b.segment + b.snowflake));
  const w = width / Math.max(1, history.length);
  const bars = history
    .map((b, i) => {
      let y = height;
      return (['pool', 'segment', 'snowflake'] as const)
        .map((source) => {
          const h = (b[source] / max) * (height - 10);
          y -= h;
          return h > 0
            ? `<rect x="${(i * w).toFixed(1)}" y="${y.toFixed(1)}" width="${Math.max(1, w - 1).toFixed(1)}" height="${h.toFixed(1)}" fill="${SOURCE_COLOURS[source]}"><title>${new Date(b.at).toISOString()} ${source}: ${b[source]}</title></rect>`
            : '';
        })
        .join('');
    })
    .join('');
  return `<svg id="chart" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="IDs issued per source"><rect width="${width}" height="${height}" fill="#fafafa"/>${bars}<text x="4" y="12" font-size="11">${max} per bucket</text></svg>`;
}

function esc(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
