/** Links shown in the dashboard's header besides /status, /metrics and /docs. */
export interface PageLinks {
  ui?: string | undefined;
  grafana?: string | undefined;
}

/**
 * The dashboard's HTML: a static shell the page's script fills from `/dashboard/data.json`.
 * Only the links (from configuration) are put in here, escaped; the config travels as JSON in
 * a non-executed script element.
 */
export function dashboardPageHtml(config: Record<string, unknown>, links: PageLinks): string {
  const link = (href: string, text: string) => `<a href="${esc(href)}">${esc(text)}</a>`;
  const nav = [
    links.ui ? link(links.ui, 'BullMQ (/ui)') : '',
    link('status', 'status'),
    link('docs', 'API docs'),
    link('metrics', 'metrics'),
    links.grafana ? link(links.grafana, 'Grafana') : '',
  ]
    .filter(Boolean)
    .join(' · ');
  const sorts = [
    ['attention', 'needs attention first'],
    ['name', 'name'],
    ['depth', 'depth (lowest first)'],
    ['fill', 'fill ratio (lowest first)'],
    ['last-refill', 'last refill (oldest first)'],
  ]
    .map(([value, text]) => `<option value="${value}">${text}</option>`)
    .join('');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>idmint dashboard</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">
<link rel="stylesheet" href="dashboard/app.css"></head>
<body>
<header><h1>idmint</h1><nav>${nav}</nav><span id="updated" aria-live="polite">loading…</span></header>
<div id="down" role="alert"></div>
<section id="summary" aria-label="what needs attention"><h2>Needs attention</h2><ul id="attention"></ul></section>
<section><h2>Servers and processes</h2><table id="health"><thead><tr><th>process</th><th>roles</th><th>status</th><th>checks</th><th>version</th><th>last report</th></tr></thead><tbody></tbody></table>
<p id="store-note"></p></section>
<section><h2>Tags <small id="tag-count"></small></h2>
<div class="controls"><input id="tag-filter" type="search" placeholder="filter by tag name" aria-label="filter by tag name" autocomplete="off">
<label><input id="attention-only" type="checkbox"> needs attention only</label>
<label>sort by <select id="tag-sort">${sorts}</select></label></div>
<div class="legend"><span><i class="depth"></i>depth</span><span><i class="target"></i>target</span><span>refills: <i class="r-threshold"></i>threshold <i class="r-cron"></i>cron <i class="r-manual"></i>manual <i class="r-failed"></i>failed <i class="r-skipped"></i>skipped</span></div>
<div id="tags"></div><p><button id="show-more" type="button" hidden></button></p></section>
<script type="application/json" id="dashboard-config">${JSON.stringify(config).replace(/</g, '\\u003c')}</script>
<script type="module" src="dashboard/app.js"></script>
</body></html>`;
}

function esc(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
