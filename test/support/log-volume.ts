import { expect } from 'vitest';

/** One JSON log line of a spawned server, as much as these checks read. */
export interface LogLine {
  level: number;
  time: number;
  msg: string;
  component?: string;
  dependency?: string;
}

/** The JSON lines of `output` (a spawned server's) from character `mark` on. */
export function logLines(output: string, mark = 0): LogLine[] {
  return output
    .slice(mark)
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);
}

/**
 * Issue 41's target for an operator reading the log through a single server's outage: at most
 * `perMinute` lines (info and above) per process in any minute of it, the first minute included
 * (an outage shorter than a minute counts as one). What is over it is printed with the failure.
 */
export function expectQuietOutage(lines: LogLine[], fromMs: number, toMs: number, perMinute = 10): void {
  const during = lines.filter((l) => l.level >= 30 && l.time >= fromMs && l.time <= toMs);
  const minutes = Math.max(1, Math.ceil((toMs - fromMs) / 60_000));
  for (let m = 0; m < minutes; m++) {
    const inMinute = during.filter((l) => l.time >= fromMs + m * 60_000 && l.time < fromMs + (m + 1) * 60_000 + (m === minutes - 1 ? 1 : 0));
    expect(
      inMinute.length,
      `log lines in minute ${m + 1} of the outage (at most ${perMinute}):\n${inMinute.map((l) => `${l.level} ${l.component ?? ''} ${l.msg}`).join('\n')}`,
    ).toBeLessThanOrEqual(perMinute);
  }
}

/** Components (or servers, for an outage logged once per process) that warned and never said they were back. */
export function unrecovered(lines: LogLine[]): string[] {
  const key = (l: LogLine): string => l.dependency ?? l.component ?? '';
  const warned = new Set(lines.filter((l) => l.level >= 40).map(key));
  const over = new Set(lines.filter((l) => l.level === 30 && /recovered|passing again/.test(l.msg)).map(key));
  return [...warned].filter((c) => !over.has(c));
}
