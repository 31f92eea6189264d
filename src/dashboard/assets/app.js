// The refill dashboard's script (served at /dashboard/app.js as an ES module, no build step, no
// dependency): polls /dashboard/data.json, keeps the history it was given (bounded by historyMs)
// and draws the page. It reads only from this server and builds every element through the DOM
// (dom.js): reports come from a shared Redis, and an admin's browser holds the token.
import { poolSeries } from './chart.js';
import { renderDown, renderProcesses, renderStoreNote, renderSummary } from './overview.js';
import { PAGE, renderTags } from './tags.js';

const config = JSON.parse(document.getElementById('dashboard-config').textContent);
const refreshMs = Math.max(250, Math.min(config.sampleMs, 5000));
const state = { samples: new Map(), refills: new Map(), last: 0, data: undefined };
const view = readView();

/** The filter, "needs attention only" and the sort live in the address (#filter=…&attention=1&sort=fill): a link shows the same list. */
function readView() {
  const params = new URLSearchParams(location.hash.slice(1));
  return { filter: params.get('filter') || '', attentionOnly: params.get('attention') === '1', sort: params.get('sort') || 'attention', limit: PAGE };
}

function writeView() {
  const params = new URLSearchParams();
  if (view.filter) params.set('filter', view.filter);
  if (view.attentionOnly) params.set('attention', '1');
  if (view.sort !== 'attention') params.set('sort', view.sort);
  history.replaceState(null, '', params.toString() ? `#${params}` : location.pathname + location.search);
}

function controls() {
  const filter = document.getElementById('tag-filter');
  const only = document.getElementById('attention-only');
  const sort = document.getElementById('tag-sort');
  filter.value = view.filter;
  only.checked = view.attentionOnly;
  sort.value = view.sort;
  const changed = () => {
    view.filter = filter.value;
    view.attentionOnly = only.checked;
    view.sort = sort.value;
    view.limit = PAGE;
    writeView();
    draw();
  };
  filter.addEventListener('input', changed);
  only.addEventListener('change', changed);
  sort.addEventListener('change', changed);
  return (kind) => {
    only.checked = true;
    sort.value = kind === 'below-target' ? 'fill' : 'attention';
    changed();
  };
}

const pick = controls();

/** The status line: when this server last answered, or why it did not. Never "cannot reach" when it answered. */
function status(text, kind) {
  const el = document.getElementById('updated');
  el.textContent = text;
  el.dataset.kind = kind;
  document.body.classList.toggle('offline', kind === 'unreachable');
  document.body.classList.toggle('answered-error', kind === 'error');
}

async function poll() {
  let res;
  try {
    const url = state.last ? `dashboard/data.json?since=${state.last}` : 'dashboard/data.json';
    res = await fetch(url, { headers: { accept: 'application/json' }, cache: 'no-store' });
  } catch (err) {
    status(`cannot reach this server (${err.message}); retrying`, 'unreachable');
    setTimeout(poll, refreshMs);
    return;
  }
  try {
    if (!res.ok) {
      const body = await res.json().catch(() => undefined);
      const message = body && body.error ? `${body.error.code}: ${body.error.message}` : res.statusText;
      status(`this server answered HTTP ${res.status} (${message}); showing what the page has, retrying`, 'error');
      return;
    }
    const data = await res.json();
    for (const s of data.samples) state.samples.set(s.at, s);
    for (const e of data.refills) state.refills.set(`${e.at}/${e.bizTag}/${e.shard}/${e.by}`, e);
    // The next poll asks for what came after the newest entry this page holds.
    const newest = Math.max(0, ...data.samples.map((s) => s.at), ...data.refills.map((e) => e.at));
    if (newest > state.last) state.last = newest;
    trim(data.now - config.historyMs);
    state.data = data;
    draw();
    status(
      `updated ${new Date(data.now).toLocaleTimeString()}${data.down.length ? ` · ${data.down.map((d) => d.name).join(', ')} down` : ''}`,
      data.down.length ? 'degraded' : 'ok',
    );
  } catch (err) {
    // The server answered; something in this page failed. Say so, not that the server is unreachable.
    status(`this page could not draw the answer (${err.message}); retrying`, 'error');
  } finally {
    setTimeout(poll, refreshMs);
  }
}

function trim(floor) {
  for (const [k, s] of state.samples) if (s.at < floor) state.samples.delete(k);
  for (const [k, e] of state.refills) if (e.at < floor) state.refills.delete(k);
}

function draw() {
  const data = state.data;
  if (!data) return;
  renderDown(data);
  renderSummary(data, pick);
  renderProcesses(data);
  renderStoreNote(data);
  const samples = [...state.samples.values()].sort((a, b) => a.at - b.at);
  const refills = new Map();
  for (const e of [...state.refills.values()].sort((a, b) => a.at - b.at)) {
    const list = refills.get(e.bizTag);
    if (list) list.push(e);
    else refills.set(e.bizTag, [e]);
  }
  // The time axis spans the history this page holds, up to historyMs.
  const now = data.now;
  const from = Math.max(now - config.historyMs, Math.min(now - 60000, samples.length ? samples[0].at : now));
  const onMore = () => {
    view.limit = Infinity;
    draw();
  };
  renderTags({ data, view, series: poolSeries(samples), refills, samples, from, onMore });
}

poll();
