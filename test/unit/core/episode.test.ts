import { describe, expect, it } from 'vitest';
import { Episode } from '../../../src/core/episode.js';
import { dependencyOf, IdmintError, notReady } from '../../../src/core/errors.js';
import { ManualClock, memoryLogger } from './helpers.js';

const WARN = 40;
const INFO = 30;
const noisy = (lines: Array<Record<string, unknown>>): Array<[unknown, unknown]> =>
  lines.filter((l) => (l.level as number) >= INFO).map((l) => [l.level, l.msg]);

describe('Episode', () => {
  it('logs a failure once, a reminder a minute and the recovery with its length', () => {
    const { logger, lines } = memoryLogger();
    const clock = new ManualClock(0);
    const e = new Episode(logger, 'thing down', { clock });
    for (let s = 0; s < 130; s++) {
      e.fail({}, 'refused');
      clock.advance(1000);
    }
    e.recover();
    expect(noisy(lines)).toEqual([
      [WARN, 'thing down (repeats are logged at debug, with a reminder each minute, until it recovers)'],
      [WARN, 'thing down: still failing'],
      [WARN, 'thing down: still failing'],
      [INFO, 'thing down: recovered after 130 s'],
    ]);
  });

  it('one server down, felt by many parts of a process: one line when it starts, one reminder a minute, one line when the last part is back', () => {
    const { logger, lines } = memoryLogger();
    const clock = new ManualClock(0);
    const client = new Episode(logger, 'ZooKeeper connection lost', { clock, dependency: 'zookeeper' });
    const fence = new Episode(logger, 'the fence is unreachable', { clock, dependency: 'zookeeper' });
    const segments = new Episode(logger, 'segment allocations failing', { clock });
    const unrelated = new Episode(logger, 'redis connection lost', { clock, dependency: 'redis' });
    client.fail({}, 'disconnected');
    for (let s = 0; s < 90; s++) {
      fence.fail({}, 'open');
      segments.fail({}, 'the fence is unreachable', 'zookeeper');
      clock.advance(1000);
    }
    unrelated.fail({}, 'closed');
    client.recover();
    fence.recover();
    segments.recover();
    unrelated.recover();
    expect(noisy(lines)).toEqual([
      [WARN, 'ZooKeeper connection lost (repeats are logged at debug, with a reminder each minute, until it recovers)'],
      [WARN, 'ZooKeeper connection lost: still failing'],
      [WARN, 'redis connection lost (repeats are logged at debug, with a reminder each minute, until it recovers)'],
      [INFO, 'ZooKeeper connection lost: recovered after 90.0 s'],
      [INFO, 'redis connection lost: recovered after 0 ms'],
    ]);
    expect(lines.find((l) => String(l.msg).includes('recovered after 90.0 s'))).toMatchObject({
      dependency: 'zookeeper',
      affected: ['the fence is unreachable', 'segment allocations failing'],
    });
    // Over: the next outage starts its own first line.
    fence.fail({}, 'open');
    expect(noisy(lines).at(-1)).toEqual([WARN, 'the fence is unreachable (repeats are logged at debug, with a reminder each minute, until it recovers)']);
    fence.recover();
  });

  it('dependencyOf reads the server an error names, through its causes', () => {
    expect(dependencyOf(notReady('Redis (take)', new Error('closed'), 'redis'))).toBe('redis');
    expect(dependencyOf(new IdmintError('NOT_READY', 'x', { details: { pgUnreachable: true } }))).toBe('postgres');
    expect(dependencyOf(new IdmintError('NOT_READY', 'wrapped', { cause: new IdmintError('NOT_READY', 'x', { details: { zkUnreachable: true } }) }))).toBe(
      'zookeeper',
    );
    expect(dependencyOf(new Error('plain'))).toBeUndefined();
    expect(dependencyOf(new IdmintError('BAD_REQUEST', 'x'))).toBeUndefined();
  });
});
