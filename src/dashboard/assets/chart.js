// A tag's depth chart: pool depth and target over time (summed over shards), refills on a band below.
import { num, s } from './dom.js';

const W = 760;
const H = 150;
const BAND = 16; // the refill timeline under the depth chart

/** Per tag, per sample holding its pools: depth, target and demand summed over shards (one pass over the samples). */
export function poolSeries(samples) {
  const byTag = new Map();
  for (const sample of samples) {
    const here = new Map();
    for (const p of sample.pools) {
      let point = here.get(p.bizTag);
      if (!point) here.set(p.bizTag, (point = { at: sample.at, depth: 0, target: null, rate: 0, pools: [] }));
      point.depth += p.depth;
      point.rate += p.rate;
      if (p.target !== null) point.target = (point.target || 0) + p.target;
      point.pools.push(p);
    }
    for (const [tag, point] of here) {
      const series = byTag.get(tag);
      if (series) series.push(point);
      else byTag.set(tag, [point]);
    }
  }
  return byTag;
}

/** IDs issued by source between the sample nearest `from` and the newest (a process restart counts as zero). */
export function issuedSince(tag, samples, from) {
  const newest = samples[samples.length - 1];
  const oldest = samples.find((x) => x.at >= from) || newest;
  if (!newest || oldest === newest) return undefined;
  const a = oldest.issued[tag] || { pool: 0, segment: 0, snowflake: 0 };
  const b = newest.issued[tag] || { pool: 0, segment: 0, snowflake: 0 };
  const d = (k) => Math.max(0, b[k] - a[k]);
  return { pool: d('pool'), segment: d('segment'), snowflake: d('snowflake'), seconds: (newest.at - oldest.at) / 1000 };
}

export function chart(series, refills, now, from) {
  const spanMs = Math.max(1, now - from);
  const x = (t) => ((Math.max(from, t) - from) / spanMs) * W;
  const plotH = H - BAND - 4;
  const max = Math.max(1, ...series.map((p) => Math.max(p.depth, p.target || 0))) * 1.1;
  const y = (v) => plotH - (v / max) * (plotH - 12);
  const line = (pts) => pts.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(' ');
  const depth = line(series.map((p) => [p.at, p.depth]));
  const target = line(series.filter((p) => p.target !== null).map((p) => [p.at, p.target]));
  const marks = refills.map((e) => {
    const cls = e.status === 'pushed' ? `r-${e.reason}` : `r-${e.status}`;
    const w = Math.max(3, (e.ms / spanMs) * W);
    const title =
      `${new Date(e.at).toLocaleTimeString()} ${e.reason} refill of shard ${e.shard}: ${e.status}` +
      (e.status === 'pushed' ? `, ${e.segments} segment(s), ${e.ids.toLocaleString('en-US')} IDs, ${e.ms} ms` : `, ${e.why || ''}`);
    return s(
      'rect',
      {
        class: `refill ${cls}`,
        'data-reason': e.reason,
        'data-status': e.status,
        x: (x(e.at) - w).toFixed(1),
        y: H - BAND,
        width: w.toFixed(1),
        height: BAND - 2,
      },
      s('title', {}, title),
    );
  });
  const lastDepth = series.length ? series[series.length - 1].depth : '';
  const label = series.length ? `max ${num(max / 1.1)}` : 'no pool readings yet (pools are read every sample interval)';
  const ago = spanMs < 120000 ? `${Math.round(spanMs / 1000)} s ago` : `${Math.round(spanMs / 60000)} min ago`;
  return s(
    'svg',
    {
      class: 'chart',
      viewBox: `0 0 ${W} ${H}`,
      width: W,
      height: H,
      role: 'img',
      'aria-label': 'pool depth and target over time, refills below',
      'data-points': series.length,
      'data-last-depth': lastDepth,
    },
    s('rect', { class: 'plot', width: W, height: plotH }),
    s('rect', { class: 'band', y: H - BAND, width: W, height: BAND - 2 }),
    target ? s('polyline', { class: 'target', points: target }) : null,
    depth ? s('polyline', { class: 'depth', points: depth }) : null,
    marks,
    s('text', { x: 4, y: 12 }, label),
    s('text', { x: W - 4, y: plotH - 4, 'text-anchor': 'end' }, 'now'),
    s('text', { x: 4, y: plotH - 4 }, ago),
  );
}
