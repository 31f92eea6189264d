/**
 * The report's chart: IDs/s per path over time (log scale: blocks and single IDs differ by
 * orders of magnitude), with each fault as a labelled vertical line. Plain SVG.
 */
export interface ChartFault {
  atSecond: number;
  label: string;
}

const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22', '#7f7f7f', '#000000'];

export function chartSvg(timeline: Map<string, number[]>, faults: ChartFault[], title: string): string {
  const width = 1200;
  const height = 520;
  const left = 70;
  const right = 230;
  const top = 40;
  const bottom = 50;
  const seconds = Math.max(1, ...[...timeline.values()].map((l) => l.length));
  const maxRate = Math.max(10, ...[...timeline.values()].flat());
  const decades = Math.ceil(Math.log10(maxRate));
  const x = (s: number): number => left + (s / seconds) * (width - left - right);
  const y = (v: number): number => top + (1 - Math.log10(Math.max(1, v)) / decades) * (height - top - bottom);
  const esc = (t: string): string => t.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${left}" y="20" font-size="14">${esc(title)}</text>`,
  ];
  for (let d = 0; d <= decades; d++) {
    const v = 10 ** d;
    parts.push(
      `<line x1="${left}" x2="${width - right}" y1="${y(v)}" y2="${y(v)}" stroke="#eee"/>`,
      `<text x="${left - 6}" y="${y(v) + 4}" text-anchor="end">${v >= 1e6 ? `${v / 1e6}M` : v >= 1e3 ? `${v / 1e3}k` : v}</text>`,
    );
  }
  const step = Math.max(10, Math.ceil(seconds / 12 / 10) * 10);
  for (let s = 0; s <= seconds; s += step) parts.push(`<text x="${x(s)}" y="${height - bottom + 16}" text-anchor="middle">${s}s</text>`);
  parts.push(`<text x="${left - 50}" y="${top - 10}">IDs/s</text>`);
  faults.forEach((f, i) => {
    parts.push(`<line x1="${x(f.atSecond)}" x2="${x(f.atSecond)}" y1="${top}" y2="${height - bottom}" stroke="#d62728" stroke-dasharray="3,3"/>`);
    parts.push(`<text x="${x(f.atSecond) + 2}" y="${top + 10 + (i % 8) * 11}" fill="#d62728" font-size="9">${esc(f.label)}</text>`);
  });
  [...timeline.entries()].forEach(([path, line], i) => {
    const color = COLORS[i % COLORS.length]!;
    const points = line.map((v, s) => `${x(s + 0.5).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
    parts.push(`<polyline fill="none" stroke="${color}" stroke-width="1.5" points="${points}"/>`);
    parts.push(
      `<rect x="${width - right + 15}" y="${top + i * 18}" width="12" height="12" fill="${color}"/>`,
      `<text x="${width - right + 32}" y="${top + i * 18 + 10}">${esc(path)}</text>`,
    );
  });
  parts.push(
    `<line x1="${left}" x2="${left}" y1="${top}" y2="${height - bottom}" stroke="#333"/>`,
    `<line x1="${left}" x2="${width - right}" y1="${height - bottom}" y2="${height - bottom}" stroke="#333"/>`,
    '</svg>',
  );
  return parts.join('\n');
}
