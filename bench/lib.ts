/** Helpers shared by bench modules: the Section type, table formatting, duplicate counting. */

/** What a bench module's `run()` returns: a titled chunk of Markdown for bench/RESULTS.md. */
export interface Section {
  title: string;
  /** Markdown, without the title heading. */
  body: string;
}

export function table(headers: string[], rows: Array<Array<string | number>>): string {
  const line = (cells: Array<string | number>): string => `| ${cells.map(String).join(' | ')} |`;
  return [line(headers), line(headers.map(() => '---')), ...rows.map(line)].join('\n');
}

/** 4,051,234 → "4.05 M". */
export function perSecond(rate: number): string {
  if (rate >= 1e6) return `${(rate / 1e6).toFixed(2)} M`;
  if (rate >= 1e3) return `${(rate / 1e3).toFixed(1)} k`;
  return rate.toFixed(0);
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

/** Duplicates in a typed array of IDs: sorts a copy and counts equal neighbours. */
export function duplicatesInTyped(values: BigInt64Array | BigUint64Array | Float64Array): number {
  const sorted = values.slice().sort();
  let dups = 0;
  for (let i = 1; i < sorted.length; i++) if (sorted[i] === sorted[i - 1]) dups++;
  return dups;
}

export function duplicatesInStrings(values: string[]): number {
  return values.length - new Set(values).size;
}
