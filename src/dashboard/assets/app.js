// The refill dashboard's script (served at /dashboard/app.js, no build step, no dependency):
// polls /dashboard/data.json, keeps the history it was given (bounded by historyMs) and draws
// one panel per tag as SVG. It reads only from this server. Every value that reaches markup
// goes through esc(): reports come from a shared Redis, and an admin's browser holds the token.
(function () {
  'use strict';
  const config = JSON.parse(document.getElementById('dashboard-config').textContent);
  const refreshMs = Math.max(250, Math.min(config.sampleMs, 5000));
  const W = 760;
  const H = 150;
  const BAND = 16; // the refill timeline under the depth chart
  const state = { samples: new Map(), refills: new Map(), processes: [], tags: [], last: 0, storeError: undefined, store: config.store };

  const esc = (v) => String(v).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  const num = (v) => (v === null || v === undefined ? '—' : Math.round(v).toLocaleString('en-US'));
  const ago = (ms) => (ms < 1500 ? 'just now' : ms < 120000 ? `${Math.round(ms / 1000)} s ago` : `${Math.round(ms / 60000)} min ago`);

  async function poll() {
    try {
      const url = state.last ? `dashboard/data.json?since=${state.last}` : 'dashboard/data.json';
      const res = await fetch(url, { headers: { accept: 'application/json' }, cache: 'no-store' });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const data = await res.json();
      state.tags = data.tags;
      state.processes = data.processes;
      state.storeError = data.storeError;
      for (const s of data.samples) state.samples.set(s.at, s);
      for (const e of data.refills) state.refills.set(`${e.at}/${e.bizTag}/${e.shard}/${e.by}`, e);
      // The next poll asks for what came after the newest entry this page holds.
      const newest = Math.max(0, ...data.samples.map((s) => s.at), ...data.refills.map((e) => e.at));
      if (!data.storeError && newest > state.last) state.last = newest;
      trim(data.now - config.historyMs);
      render(data.now);
      document.getElementById('updated').textContent = `updated ${new Date(data.now).toLocaleTimeString()}`;
      document.body.classList.remove('offline');
    } catch (err) {
      document.getElementById('updated').textContent = `cannot reach this server (${err.message}); retrying`;
      document.body.classList.add('offline');
    } finally {
      setTimeout(poll, refreshMs);
    }
  }

  function trim(floor) {
    for (const [k, s] of state.samples) if (s.at < floor) state.samples.delete(k);
    for (const [k, e] of state.refills) if (e.at < floor) state.refills.delete(k);
  }

  function render(now) {
    renderHealth();
    const note = document.getElementById('store-note');
    note.textContent = state.storeError
      ? `History paused: the dashboard's store (Redis) cannot be read (${state.storeError}). This page keeps what it has drawn.`
      : state.store === 'memory'
        ? 'History of this process only (no Redis): it starts again when the process restarts.'
        : 'History shared by every process of the deployment (kept in Redis).';
    note.className = state.storeError ? 'bad' : '';
    const samples = [...state.samples.values()].sort((a, b) => a.at - b.at);
    const refills = [...state.refills.values()].sort((a, b) => a.at - b.at);
    const container = document.getElementById('tags');
    if (state.tags.length === 0) container.innerHTML = '<p>No tags yet: <code>idmint biz create &lt;bizTag&gt;</code></p>';
    // The time axis spans the history this page holds, up to historyMs.
    const from = Math.max(now - config.historyMs, Math.min(now - 60000, samples.length ? samples[0].at : now));
    if (state.tags.length > 0) container.innerHTML = state.tags.map((t) => renderTag(t, samples, refills.filter((e) => e.bizTag === t.bizTag), now, from)).join('');
  }

  function renderHealth() {
    const rows = state.processes.map((p) => {
      const status = p.silent ? 'silent' : p.status;
      const cls = status === 'ready' ? 'ok' : status === 'degraded' ? 'warn' : 'bad';
      const checks = Object.entries(p.checks)
        .map(([name, c]) => `<span class="check ${c.ok ? 'ok' : 'bad'}" data-check="${esc(name)}" title="${esc(c.message || (c.ok ? 'ok' : 'failing'))}">${esc(name)}</span>`)
        .join(' ');
      const who = `${esc(p.host)}:${esc(p.pid)}${p.id === state.processes[0].id ? ' (this page)' : ''}`;
      return `<tr data-process="${esc(p.id)}" class="${p.silent ? 'silent' : ''}"><td>${who}</td><td>${esc(p.roles.join(', '))}</td><td><span class="status ${cls}">${esc(status)}</span></td><td>${checks}</td><td>${esc(p.version)}</td><td>${esc(p.silent ? `silent for ${ago(p.silentMs).replace(' ago', '')}` : ago(p.silentMs))}</td></tr>`;
    });
    document.querySelector('#health tbody').innerHTML = rows.join('');
  }

  /** Per tag and sample: pools summed over shards. */
  function poolSeries(tag, samples) {
    const out = [];
    for (const s of samples) {
      const pools = s.pools.filter((p) => p.bizTag === tag);
      if (pools.length === 0) continue;
      const target = pools.some((p) => p.target !== null) ? pools.reduce((n, p) => n + (p.target || 0), 0) : null;
      out.push({ at: s.at, depth: pools.reduce((n, p) => n + p.depth, 0), target, rate: pools.reduce((n, p) => n + p.rate, 0), pools });
    }
    return out;
  }

  /** IDs issued by source between the sample nearest `from` and the newest (a process restart counts as zero). */
  function issuedSince(tag, samples, from) {
    const newest = samples[samples.length - 1];
    const oldest = samples.find((s) => s.at >= from) || newest;
    if (!newest || oldest === newest) return undefined;
    const a = oldest.issued[tag] || { pool: 0, segment: 0, snowflake: 0 };
    const b = newest.issued[tag] || { pool: 0, segment: 0, snowflake: 0 };
    const d = (k) => Math.max(0, b[k] - a[k]);
    return { pool: d('pool'), segment: d('segment'), snowflake: d('snowflake'), seconds: (newest.at - oldest.at) / 1000 };
  }

  function renderTag(tag, samples, refills, now, from) {
    const series = poolSeries(tag.bizTag, samples);
    const latest = series[series.length - 1];
    const minute = issuedSince(tag.bizTag, samples, now - 60000);
    const five = issuedSince(tag.bizTag, samples, now - 300000);
    const total5 = five ? five.pool + five.segment + five.snowflake : 0;
    const pooled = tag.mode === 'segment';
    const share = pooled && five && total5 > 0 ? `${(((five.segment + five.snowflake) / total5) * 100).toFixed(1)} %` : '—';
    const pushed = refills.filter((e) => e.status === 'pushed');
    const last = pushed[pushed.length - 1];
    const meanMs = pushed.length ? pushed.reduce((n, e) => n + e.ms, 0) / pushed.length : undefined;
    const stat = (name, key, value, title) => `<div class="stat" data-stat="${key}"${title ? ` title="${esc(title)}"` : ''}><dt>${name}</dt><dd>${esc(value)}</dd></div>`;
    const stats = [
      stat('depth', 'depth', latest ? num(latest.depth) : '—'),
      stat('target', 'target', latest ? num(latest.target) : '—'),
      stat('demand', 'demand', latest ? `${num(latest.rate)}/s` : '—', 'IDs per second asked of the pool over its demand window'),
      stat('issued', 'issued', minute ? `${num((minute.pool + minute.segment + minute.snowflake) / Math.max(1, minute.seconds))}/s` : '—', 'IDs per second handed out by every process, last minute'),
      stat('fallback share', 'fallback', share, 'Share of IDs not from the pool (segment or Snowflake fallback), last 5 minutes'),
      stat('last refill', 'last-refill', last ? ago(now - last.at) : 'none yet'),
      stat('refills', 'refills', `${pushed.length}${meanMs !== undefined ? `, mean ${Math.round(meanMs)} ms` : ''}`, 'Refills in the history shown, and how long they took'),
    ].join('');
    const kafka = latest ? latest.pools.filter((p) => p.kafka) : [];
    const kafkaTable = kafka.length
      ? `<table class="kafka"><thead><tr><th>topic</th><th>group</th><th>depth (IDs)</th><th>lag per partition (blocks)</th><th>IDs per block</th></tr></thead><tbody>${kafka
          .map((p) => `<tr data-topic="${esc(p.kafka.topic)}"><td>${esc(p.kafka.topic)}</td><td>${esc(p.kafka.group)}</td><td class="n">${esc(num(p.depth))}</td><td>${esc(p.kafka.lagBlocks.join(' · ') || '—')}</td><td class="n">${esc(num(p.kafka.blockIds))}</td></tr>`)
          .join('')}</tbody></table>`
      : '';
    const what = `${esc(tag.mode)}${pooled ? `, pool ${esc(tag.pool)}${latest ? ` (${esc([...new Set(latest.pools.map((p) => p.kind))].join(', '))})` : ''}` : ''}, ${esc(tag.shards)} shard${tag.shards === 1 ? '' : 's'}, fallback ${esc(tag.fallback)}`;
    return `<article class="tag" data-tag="${esc(tag.bizTag)}"><h3>${esc(tag.bizTag)} <small>${what}</small></h3><dl class="stats">${stats}</dl>${chart(series, refills, now, from)}${kafkaTable}</article>`;
  }

  function chart(series, refills, now, from) {
    const span = Math.max(1, now - from);
    const x = (t) => ((Math.max(from, t) - from) / span) * W;
    const plotH = H - BAND - 4;
    const max = Math.max(1, ...series.map((p) => Math.max(p.depth, p.target || 0))) * 1.1;
    const y = (v) => plotH - (v / max) * (plotH - 12);
    const line = (pts) => pts.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(' ');
    const depth = line(series.map((p) => [p.at, p.depth]));
    const target = line(series.filter((p) => p.target !== null).map((p) => [p.at, p.target]));
    const marks = refills
      .map((e) => {
        const cls = e.status === 'pushed' ? `r-${e.reason}` : `r-${e.status}`;
        const w = Math.max(3, (e.ms / span) * W);
        const title = `${new Date(e.at).toLocaleTimeString()} ${e.reason} refill of shard ${e.shard}: ${e.status}` + (e.status === 'pushed' ? `, ${e.segments} segment(s), ${e.ids.toLocaleString('en-US')} IDs, ${e.ms} ms` : `, ${e.why || ''}`);
        return `<rect class="refill ${esc(cls)}" data-reason="${esc(e.reason)}" data-status="${esc(e.status)}" x="${(x(e.at) - w).toFixed(1)}" y="${H - BAND}" width="${w.toFixed(1)}" height="${BAND - 2}"><title>${esc(title)}</title></rect>`;
      })
      .join('');
    const lastDepth = series.length ? series[series.length - 1].depth : '';
    const label = series.length ? `max ${num(max / 1.1)}` : 'no pool readings yet (pools are read every sample interval)';
    return `<svg class="chart" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="pool depth and target over time, refills below" data-points="${series.length}" data-last-depth="${esc(lastDepth)}">` +
      `<rect class="plot" width="${W}" height="${plotH}"/><rect class="band" y="${H - BAND}" width="${W}" height="${BAND - 2}"/>` +
      (target ? `<polyline class="target" points="${target}"/>` : '') +
      (depth ? `<polyline class="depth" points="${depth}"/>` : '') +
      `${marks}<text x="4" y="12">${esc(label)}</text><text x="${W - 4}" y="${plotH - 4}" text-anchor="end">now</text><text x="4" y="${plotH - 4}">${span < 120000 ? `${Math.round(span / 1000)} s` : `${Math.round(span / 60000)} min`} ago</text></svg>`;
  }

  poll();
})();
