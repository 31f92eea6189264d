// The top of the page: the servers that are down (red), what needs attention, every process.
import { ago, h, some, span } from './dom.js';

/** One red line per server down, naming it. */
export function renderDown(data) {
  const el = document.getElementById('down');
  el.replaceChildren(
    ...data.down.map((d) =>
      h('p', { class: 'down', 'data-server': d.id }, h('b', {}, `${d.name} is down`), `: ${d.message}`, d.by.length ? ` (seen by ${some(d.by, 4)})` : ''),
    ),
  );
}

const ITEMS = [
  ['servers-down', 'serversDown', 'server down', 'servers down'],
  ['failing-refills', 'failingRefills', 'tag with failing refills', 'tags with failing refills'],
  ['below-target', 'belowTarget', 'tag below target', 'tags below target'],
  ['silent-processes', 'silentProcesses', 'silent process', 'silent processes'],
];

/** What needs an operator, first: counts and names; `pick(kind)` narrows the tag list to it. */
export function renderSummary(data, pick) {
  const list = document.getElementById('attention');
  const items = ITEMS.map(([key, field, one, many]) => {
    const names = data.summary[field];
    const cls = names.length === 0 ? 'quiet' : key === 'servers-down' || key === 'failing-refills' || key === 'silent-processes' ? 'bad' : 'warn';
    const show =
      names.length > 0 && (key === 'failing-refills' || key === 'below-target') ? h('button', { type: 'button', 'data-pick': key }, 'show them') : null;
    if (show) show.addEventListener('click', () => pick(key));
    return h(
      'li',
      { 'data-summary': key, class: cls },
      h('b', { class: 'count' }, names.length),
      ` ${names.length === 1 ? one : many}`,
      names.length ? h('span', { class: 'names' }, `: ${some(names)}`) : '',
      show ? ' ' : '',
      show,
    );
  });
  const total = ITEMS.reduce((n, [, field]) => n + data.summary[field].length, 0);
  list.replaceChildren(...items);
  list.classList.toggle('calm', total === 0);
  document.getElementById('summary').dataset.total = String(total);
}

const STATE = { ready: 'ok', degraded: 'warn', not_ready: 'bad', silent: 'bad', stopped: 'stopped', unheard: 'unheard' };
const STATE_TEXT = { not_ready: 'not ready', unheard: 'not heard' };

/** Every process: named host:port with its roles; stopped ones grey, silent ones red, unheard ones grey with why. */
export function renderProcesses(data) {
  const rows = data.processes.map((p) => {
    const checks = Object.entries(p.checks).map(([name, c]) =>
      h('span', { class: `check ${c.ok ? 'ok' : 'bad'}`, 'data-check': name, title: c.message || (c.ok ? 'ok' : 'failing') }, name),
    );
    const last =
      p.state === 'stopped'
        ? `stopped ${ago(data.now - (p.stoppedAt ?? p.at))}`
        : p.state === 'silent'
          ? `silent for ${span(p.silentMs)}`
          : p.state === 'unheard'
            ? `last heard ${ago(p.silentMs)}`
            : ago(p.silentMs);
    const who = [h('span', { class: 'name' }, p.name), p.self ? ' (this page)' : '', p.pid ? h('small', { title: p.id }, ` pid ${p.pid}`) : ''];
    return h(
      'tr',
      { 'data-process': p.id, 'data-state': p.state, class: p.state },
      h('td', {}, who),
      h('td', {}, p.roles.join(', ')),
      h('td', {}, h('span', { class: `status ${STATE[p.state] || 'bad'}`, title: p.note || '' }, STATE_TEXT[p.state] || p.state)),
      h(
        'td',
        {},
        checks.flatMap((c) => [c, ' ']),
      ),
      h('td', {}, p.version),
      h('td', {}, last, p.note ? h('div', { class: 'note' }, p.note) : ''),
    );
  });
  document.querySelector('#health tbody').replaceChildren(...rows);
}

/** Where the history shown comes from. */
export function renderStoreNote(data) {
  const note = document.getElementById('store-note');
  note.textContent = data.storeError
    ? `History from this server's memory: the shared history in Redis cannot be read (${data.storeError}). It is the deployment's history as this server last read it, and what it saw since.`
    : data.store === 'memory'
      ? 'History of this process only (no Redis): it starts again when the process restarts.'
      : 'History shared by every process of the deployment (kept in Redis).';
  note.className = data.storeError ? 'bad' : '';
}
