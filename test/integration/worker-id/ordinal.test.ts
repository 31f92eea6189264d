import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { LEAF_LAYOUT } from '../../../src/core/layout.js';
import { env } from '../../support/env.js';
import { sleep, until } from '../../support/poll.js';
import { expectNoDuplicates } from '../../support/unique.js';
import { tempDir, zkRoots } from './helpers.js';

const fixture = fileURLToPath(new URL('./fixtures/ordinal-issue.ts', import.meta.url));
const roots = zkRoots();
const children: ChildProcess[] = [];

interface Pod {
  child: ChildProcess;
  /** Complete lines of IDs. */
  batches: Array<{ ids: string[] }>;
  log: string;
  ready: Promise<number>;
}

/** One "pod": the fixture with a StatefulSet pod's identity and ordinal, in a data dir of its own (an emptyDir). */
function startPod(address: string, root: string, ordinal: number): Pod {
  const child = spawn(process.execPath, ['--import', 'tsx', fixture, env('ZK_CONNECT'), address, root, tempDir(), String(ordinal), '4000'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  const pod: Pod = { child, batches: [], log: '', ready: Promise.resolve(-1) };
  let partial = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    const lines = (partial + d).split('\n');
    partial = lines.pop()!;
    if (lines.length > 0) pod.batches.push({ ids: lines.filter(Boolean) });
  });
  pod.ready = new Promise((resolve, reject) => {
    child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      pod.log += d;
      const m = /ready (\d+)/.exec(pod.log);
      if (m) resolve(Number(m[1]));
    });
    child.on('exit', (code) => reject(new Error(`pod exited with ${code}:\n${pod.log}`)));
  });
  return pod;
}

const idsOf = (pod: Pod) => pod.batches.flatMap((b) => b.ids);

afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
});
afterAll(() => roots.removeAll());

describe('two live processes with one ordinal (a force-deleted pod that still runs, and its replacement)', () => {
  it('the replacement waits and says why; once the old one is frozen past its lease it takes the id over above its mark; the old one, resumed, issues nothing; 0 duplicates', async () => {
    const root = roots.next();
    const address = 'idmint-api-0.idmint-api.default.svc:8080';
    const old = startPod(address, root, 0);
    expect(await old.ready).toBe(0);
    await until('the old pod to issue', () => idsOf(old).length > 1000);

    const replacement = startPod(address, root, 0);
    await until('the replacement to say why it waits', () => replacement.log.includes('still leased under this identity'));
    await sleep(1500);
    expect(replacement.batches, 'the replacement issued while the old pod held the id').toEqual([]);

    // The old pod stops answering (frozen, partitioned): its session expires; it has stopped issuing before.
    old.child.kill('SIGSTOP');
    const frozenAt = Date.now();
    expect(await replacement.ready).toBe(0);
    const tookOverAt = Date.now();
    expect(tookOverAt - frozenAt).toBeGreaterThan(2000); // not before the lease could have expired
    await until('the replacement to issue', () => idsOf(replacement).length > 1000);

    // Resumed, the old pod finds its lease gone and the id held under its own identity: it waits,
    // issues nothing. (Its output may still arrive late: judge IDs by the time stamped into them.)
    old.child.kill('SIGCONT');
    await until('the resumed old pod to notice', () => old.log.includes('worker-id lease lost'));
    await sleep(1500);
    const stamped = (pod: Pod) => idsOf(pod).map((id) => LEAF_LAYOUT.decode(BigInt(id)).timestamp);
    const oldLast = stamped(old).reduce((a, b) => Math.max(a, b), 0);
    const replacementFirst = stamped(replacement).reduce((a, b) => Math.min(a, b), Infinity);
    expect(oldLast, 'the old pod issued after it was frozen').toBeLessThanOrEqual(frozenAt);
    expect(replacementFirst, "the replacement issued at or below the old pod's last timestamp").toBeGreaterThan(oldLast);

    const all = [...idsOf(old), ...idsOf(replacement)];
    console.info(
      `ordinal takeover: ${idsOf(old).length} IDs from the old pod, ${idsOf(replacement).length} from the replacement, took over ${tookOverAt - frozenAt} ms after the freeze`,
    );
    expect(new Set(all.map((id) => LEAF_LAYOUT.decode(BigInt(id)).worker))).toEqual(new Set([0]));
    expectNoDuplicates(all, 'IDs of two live pods with one ordinal');
  }, 120_000);
});
