import { Writable } from 'node:stream';
import pino from 'pino';
import { IdmintError } from '../../../src/core/errors.js';
import type { Clock } from '../../../src/core/ports.js';

/** A clock tests move by hand. */
export class ManualClock implements Clock {
  calls = 0;
  constructor(public ms: number) {}
  now(): number {
    this.calls += 1;
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

/** A manual clock whose waits step it: code that waits by its clock runs without real time passing. */
export class SteppingClock extends ManualClock {
  readonly waits: number[] = [];
  /** Called after each wait, with the clock's time: what the test lets happen meanwhile. */
  onWait: (nowMs: number) => void = () => undefined;
  async sleep(ms: number): Promise<void> {
    this.waits.push(ms);
    this.advance(ms);
    this.onWait(this.ms);
  }
}

/** A pino logger whose lines land in an array, as pino's own tests do. */
export function memoryLogger(): { logger: pino.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), lines };
}

/** The code of the IdmintError `fn` throws, undefined when it returns. */
export function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return err instanceof IdmintError ? err.code : `not an IdmintError: ${String(err)}`;
  }
  return undefined;
}
