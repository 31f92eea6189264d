import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { lockDataDir } from '../../../src/app/data-lock.js';

const dir = (): string => mkdtempSync(join(tmpdir(), 'idmint-lock-'));

describe('lockDataDir', () => {
  it('writes pid@host, refuses a second holder while the first lives, and frees the directory on release', () => {
    const d = dir();
    const lock = lockDataDir(d);
    expect(readFileSync(join(d, 'idmint.lock'), 'utf8')).toBe(`${process.pid}@${hostname()}`);
    // Another live process on this host holds it (this test's parent stands in for one).
    writeFileSync(join(d, 'idmint.lock'), `${process.ppid}@${hostname()}`);
    expect(() => lockDataDir(d)).toThrow(/in use by process \d+/);
    writeFileSync(join(d, 'idmint.lock'), `${process.pid}@${hostname()}`);
    lock.release();
    lock.release();
    expect(existsSync(join(d, 'idmint.lock'))).toBe(false);
    lockDataDir(d).release();
  });

  it('takes over the lock of a dead process on this host', () => {
    const d = dir();
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout;
    writeFileSync(join(d, 'idmint.lock'), `${dead}@${hostname()}`);
    const lock = lockDataDir(d);
    expect(readFileSync(join(d, 'idmint.lock'), 'utf8')).toBe(`${process.pid}@${hostname()}`);
    lock.release();
  });

  it('refuses a lock held from another host, saying how to clear it', () => {
    const d = dir();
    writeFileSync(join(d, 'idmint.lock'), '1@another-host');
    expect(() => lockDataDir(d)).toThrow(/locked by process 1 on host another-host; if that process is gone, delete/);
  });
});
