// The tags: filtered by name and attention, sorted, one card each (the first PAGE of them until asked for all).
import { chart, issuedSince } from './chart.js';
import { ago, h, num } from './dom.js';

/** Cards drawn before "show all": hundreds of charts redrawn every few seconds would make the page crawl. */
export const PAGE = 50;

const last = (v) => (v === null || v === undefined ? Infinity : v);
const byName = (a, b) => a.bizTag.localeCompare(b.bizTag);
const SORTS = {
  // Failing refills, then below target, then the emptiest, then by name.
  attention: (a, b) =>
    b.attention.length - a.attention.length || Number(b.failing !== null) - Number(a.failing !== null) || last(a.fill) - last(b.fill) || byName(a, b),
  name: byName,
  depth: (a, b) => last(a.depth) - last(b.depth) || byName(a, b),
  fill: (a, b) => last(a.fill) - last(b.fill) || byName(a, b),
  'last-refill': (a, b) => last(a.lastRefillAt) - last(b.lastRefillAt) || byName(a, b),
};

/** The rows the view asks for, in its order. */
export function select(rows, view) {
  const text = view.filter.trim().toLowerCase();
  const kept = rows.filter((r) => (!text || r.bizTag.includes(text)) && (!view.attentionOnly || r.attention.length > 0));
  return kept.sort(SORTS[view.sort] || SORTS.attention);
}

/** Draws the selected tags' cards; `series` and `refills` are per tag, `samples` the page's whole history. */
export function renderTags(ctx) {
  const { data, view, series, refills, samples, from, onMore } = ctx;
  const container = document.getElementById('tags');
  const chosen = select(data.tags, view);
  const shown = chosen.slice(0, view.limit);
  const needing = data.tags.filter((t) => t.attention.length > 0).length;
  document.getElementById('tag-count').textContent =
    `showing ${shown.length} of ${data.tags.length}` +
    (chosen.length !== data.tags.length ? ` (${chosen.length} match)` : '') +
    (needing ? `, ${needing} need attention` : '');
  const more = document.getElementById('show-more');
  more.hidden = chosen.length <= shown.length;
  more.textContent = `show all ${chosen.length}`;
  more.onclick = onMore;
  if (data.tags.length === 0) {
    container.replaceChildren(h('p', {}, 'No tags yet: ', h('code', {}, 'idmint biz create <bizTag>')));
    return;
  }
  if (chosen.length === 0) {
    container.replaceChildren(h('p', { class: 'empty' }, 'No tag matches the filter.'));
    return;
  }
  container.replaceChildren(...shown.map((t) => card(t, series.get(t.bizTag) || [], refills.get(t.bizTag) || [], samples, data.now, from)));
}

const REASONS = { 'below-target': 'below target', 'failing-refills': 'refills failing' };

function card(tag, series, refills, samples, now, from) {
  const latest = series[series.length - 1];
  const minute = issuedSince(tag.bizTag, samples, now - 60000);
  const five = issuedSince(tag.bizTag, samples, now - 300000);
  const total5 = five ? five.pool + five.segment + five.snowflake : 0;
  const pooled = tag.mode === 'segment' || tag.mode === 'unknown';
  const share = pooled && five && total5 > 0 ? `${(((five.segment + five.snowflake) / total5) * 100).toFixed(1)} %` : '—';
  const pushed = refills.filter((e) => e.status === 'pushed');
  const lastAt = tag.lastRefillAt ?? (pushed.length ? pushed[pushed.length - 1].at : null);
  const meanMs = pushed.length ? pushed.reduce((n, e) => n + e.ms, 0) / pushed.length : undefined;
  const depth = latest ? latest.depth : tag.depth;
  const target = latest ? latest.target : tag.target;
  const stat = (name, key, value, title) => h('div', { class: 'stat', 'data-stat': key, title }, h('dt', {}, name), h('dd', {}, value));
  const stats = h(
    'dl',
    { class: 'stats' },
    stat('depth', 'depth', num(depth)),
    stat('target', 'target', num(target)),
    stat('fill', 'fill', tag.fill === null ? '—' : `${Math.round(tag.fill * 100)} %`, 'depth / target in the newest sample'),
    stat(
      'demand',
      'demand',
      latest ? `${num(latest.rate)}/s` : tag.rate === null ? '—' : `${num(tag.rate)}/s`,
      'IDs per second asked of the pool over its demand window',
    ),
    stat(
      'issued',
      'issued',
      minute ? `${num((minute.pool + minute.segment + minute.snowflake) / Math.max(1, minute.seconds))}/s` : '—',
      'IDs per second handed out by every process, last minute',
    ),
    stat('fallback share', 'fallback', share, 'Share of IDs not from the pool (segment or Snowflake fallback), last 5 minutes'),
    stat('last refill', 'last-refill', lastAt === null ? 'none yet' : ago(now - lastAt)),
    stat(
      'refills',
      'refills',
      `${pushed.length}${meanMs !== undefined ? `, mean ${Math.round(meanMs)} ms` : ''}`,
      'Refills in the history shown, and how long they took',
    ),
  );
  const kafka = latest ? latest.pools.filter((p) => p.kafka) : [];
  const kafkaTable = kafka.length
    ? h(
        'table',
        { class: 'kafka' },
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            ['topic', 'group', 'depth (IDs)', 'lag per partition (blocks)', 'IDs per block'].map((t) => h('th', {}, t)),
          ),
        ),
        h(
          'tbody',
          {},
          kafka.map((p) =>
            h(
              'tr',
              { 'data-topic': p.kafka.topic },
              h('td', {}, p.kafka.topic),
              h('td', {}, p.kafka.group),
              h('td', { class: 'n' }, num(p.depth)),
              h('td', {}, p.kafka.lagBlocks.join(' · ') || '—'),
              h('td', { class: 'n' }, num(p.kafka.blockIds)),
            ),
          ),
        ),
      )
    : null;
  const kinds = latest ? ` (${[...new Set(latest.pools.map((p) => p.kind))].join(', ')})` : '';
  const what = `${tag.mode}${pooled ? `, pool ${tag.pool}${kinds}` : ''}, ${tag.shards} shard${tag.shards === 1 ? '' : 's'}, fallback ${tag.fallback}`;
  const badges = tag.attention.map((a) =>
    h(
      'span',
      {
        class: `badge ${a}`,
        title:
          a === 'failing-refills' && tag.failing
            ? `${tag.failing.failures} failed refill(s) on ${tag.failing.shards} shard(s) since ${new Date(tag.failing.since).toLocaleTimeString()}: ${tag.failing.why}`
            : '',
      },
      REASONS[a] || a,
    ),
  );
  const failing = tag.failing
    ? h('p', { class: 'failing' }, `${tag.failing.failures} refill(s) failed since ${new Date(tag.failing.since).toLocaleTimeString()}: ${tag.failing.why}`)
    : null;
  return h(
    'article',
    { class: 'tag', 'data-tag': tag.bizTag, 'data-attention': tag.attention.join(' ') || null },
    h('h3', {}, tag.bizTag, ' ', h('small', {}, what), ' ', badges),
    stats,
    failing,
    chart(series, refills, now, from),
    kafkaTable,
  );
}
