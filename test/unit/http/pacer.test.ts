import { describe, expect, it } from 'vitest';
import { Pacer } from '../../../src/http/pacer.js';

/** One turn of the event loop: what a socket read (a health probe) waits for. */
const nextLoopTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('Pacer', () => {
  it('hands out turns in arrival order, at most sliceIds per turn of the event loop (at least one)', async () => {
    const pacer = new Pacer({ sliceIds: 20_000, fromIds: 1000 });
    const ran: number[] = [];
    const turns = Array.from({ length: 10 }, (_, i) => pacer.turn(i === 3 ? 50_000 : 10_000)!.then(() => ran.push(i)));
    const perLoopTurn: number[][] = [];
    while (ran.length < 10) {
      const before = ran.length;
      await nextLoopTurn();
      perLoopTurn.push(ran.slice(before));
    }
    await Promise.all(turns);
    expect(ran).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    // 20,000 IDs a turn: two of 10,000; one bigger than a slice goes alone.
    expect(perLoopTurn.filter((batch) => batch.length > 0)).toEqual([[0, 1], [2], [3], [4, 5], [6, 7], [8, 9]]);
  });

  it('something the loop does meanwhile waits one slice, not for every big request queued (issue 42: /healthz waited for all)', async () => {
    const pacer = new Pacer({ sliceIds: 20_000, fromIds: 1000 });
    let released = 0;
    const turns = Array.from({ length: 200 }, () => pacer.turn(10_000)!.then(() => released++));
    // As a health probe read by the loop after the big requests were queued.
    await nextLoopTurn();
    await nextLoopTurn();
    expect(released).toBeLessThanOrEqual(4);
    expect(pacer.waiting).toBeGreaterThanOrEqual(196);
    await Promise.all(turns);
  });

  it('work under way goes before work not yet begun', async () => {
    const pacer = new Pacer({ sliceIds: 10_000, fromIds: 1000 });
    const order: string[] = [];
    const started = [pacer.turn(10_000)!.then(() => order.push('a')), pacer.turn(10_000)!.then(() => order.push('b'))];
    await started[0];
    await pacer.turn(10_000, 'finish')!.then(() => order.push('a finished'));
    await started[1];
    expect(order).toEqual(['a', 'a finished', 'b']);
  });

  it('small requests take no turn, and none does with sliceIds 0', () => {
    expect(new Pacer({ sliceIds: 20_000, fromIds: 1000 }).turn(999)).toBeUndefined();
    const off = new Pacer({ sliceIds: 0 });
    expect(off.turn(10_000)).toBeUndefined();
    expect(off.waiting).toBe(0);
  });
});
