import type { Logger } from '../core/logger.js';

export type CloseFn = () => Promise<unknown> | unknown;

/**
 * What a process has opened, closed in reverse order of opening. A role pushes each part right
 * after opening it, so a failed start closes exactly what it opened.
 */
export class Closers {
  private readonly parts: Array<{ name: string; close: CloseFn }> = [];
  private closing: Promise<void> | undefined;

  constructor(private readonly log: Logger) {}

  add(name: string, close: CloseFn): void {
    this.parts.push({ name, close });
  }

  /** Idempotent. A part that fails to close is logged; the rest still close. */
  closeAll(): Promise<void> {
    this.closing ??= (async () => {
      for (const part of this.parts.splice(0).reverse()) {
        try {
          await part.close();
        } catch (err) {
          this.log.error({ err, part: part.name }, 'close failed');
        }
      }
    })();
    return this.closing;
  }
}
